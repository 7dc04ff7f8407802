package container

import (
	"os"
	"strconv"
	"strings"
)

// On a systemd host (Debian 12 desktops: cgroup v2, PID 1 systemd) the guest's cgroup
// belongs in systemd's tree: a transient scope overtime-guest-NAME.scope in
// overtime.slice, with Delegate=yes so that systemd leaves everything below it to us.
// The guest runs in the sub-group "guest" of the scope (systemd rewrites the scope's own
// attributes on daemon-reload; it never touches a delegated subtree), so limits set there
// hold. Taking the guest out of the agent's service also means that restarting or
// stopping the agent's unit does not kill the guest.
//
// The scope is created for the already running launcher process with busctl (part of
// systemd, so present wherever this mode applies): Manager.StartTransientUnit with
// PIDs=[pid]. `systemd-run --scope` cannot do this: it runs a new command instead of
// adopting a process, and that command would be the one inside the new PID namespace.

// scopeUnit is the scope's unit name for guest name.
func scopeUnit(name string) string { return "overtime-guest-" + name + ".scope" }

// startScopeCommand is the busctl command line that creates the delegated scope for pid.
func startScopeCommand(unit, slice, name string, pid int) []string {
	return []string{
		"busctl", "call", "--system",
		"org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
		"StartTransientUnit", "ssa(sv)a(sa(sv))",
		unit, "fail",
		"5",
		"Description", "s", "Overtime compute guest " + name,
		"Slice", "s", slice,
		"Delegate", "b", "true",
		"CollectMode", "s", "inactive-or-failed",
		"PIDs", "au", "1", strconv.Itoa(pid),
		"0",
	}
}

// stopScopeCommand stops the scope (Stop calls it after the guest's processes are gone;
// an empty scope is collected by systemd anyway).
func stopScopeCommand(unit string) []string {
	return []string{
		"busctl", "call", "--system",
		"org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
		"StopUnit", "ss", unit, "fail",
	}
}

// scopeCgroup is the guest's cgroup path below the scope.
func scopeCgroup(slice, unit string) string {
	return "/" + slicePath(slice) + "/" + unit + "/guest"
}

// slicePath is the cgroup path of a slice: "a-b.slice" lives in "a.slice/a-b.slice".
func slicePath(slice string) string {
	base := strings.TrimSuffix(slice, ".slice")
	parts := strings.Split(base, "-")
	var out []string
	for i := range parts {
		out = append(out, strings.Join(parts[:i+1], "-")+".slice")
	}
	return strings.Join(out, "/")
}

// systemdRunning reports whether PID 1 is systemd (sd_booted: /run/systemd/system exists).
func systemdRunning() bool {
	st, err := os.Stat("/run/systemd/system")
	if err != nil || !st.IsDir() {
		return false
	}
	b, err := os.ReadFile("/proc/1/comm")
	return err == nil && strings.TrimSpace(string(b)) == "systemd"
}
