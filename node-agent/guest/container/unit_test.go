package container

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestSplitArgs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
		err  bool
	}{
		{"/sbin/init", []string{"/sbin/init"}, false},
		{"  /bin/sh   -c  'echo hi; sleep 1'  ", []string{"/bin/sh", "-c", "echo hi; sleep 1"}, false},
		{`/bin/sh -c "echo \"a b\" \$HOME \\ \x"`, []string{"/bin/sh", "-c", `echo "a b" $HOME \ \x`}, false},
		{`a\ b c`, []string{"a b", "c"}, false},
		{`x'y z'"w"`, []string{"xy zw"}, false},
		{`''`, []string{""}, false},
		{"a\tb\nc", []string{"a", "b", "c"}, false},
		{"", nil, false},
		{"'open", nil, true},
		{`"open`, nil, true},
		{`trailing\`, nil, true},
	} {
		got, err := splitArgs(c.in)
		if (err != nil) != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("splitArgs(%q) = %q, %v; want %q, err %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestCapMaskIsDockerDefaultWithoutMknodWithNetAdmin(t *testing.T) {
	// Docker's default bounding set is 0xa80425fb; CAP_MKNOD is bit 27, CAP_NET_ADMIN 12.
	if got, want := capMask(), uint64(0xa80425fb)&^(1<<27)|(1<<12); got != want {
		t.Fatalf("capMask %#x, want %#x", got, want)
	}
}

// TestSeccompProfileAllowsCMA: the guest's profile denies no call of MPI's shared-memory
// path — process_vm_readv/writev (Open MPI's vader/sm BTL, CMA) and ptrace, by which the
// kernel checks them — while the namespace, mount, key and module calls stay denied.
func TestSeccompProfileAllowsCMA(t *testing.T) {
	p := seccompProfile()
	if p.DefaultAction != specs.ActAllow {
		t.Fatalf("default action %s, want allow (a deny-list)", p.DefaultAction)
	}
	ruled := map[string]bool{}
	for _, r := range p.Syscalls {
		for _, n := range r.Names {
			ruled[n] = true
		}
	}
	for _, n := range []string{"process_vm_readv", "process_vm_writev", "ptrace"} {
		if ruled[n] {
			t.Errorf("%s has a rule in the guest's seccomp profile; MPI's CMA needs it allowed", n)
		}
	}
	for _, n := range []string{"unshare", "setns", "mount", "pivot_root", "keyctl", "init_module", "bpf", "io_uring_setup", "open_by_handle_at", "kcmp"} {
		if !ruled[n] {
			t.Errorf("%s is no longer denied in the guest's seccomp profile", n)
		}
	}
}

func TestSystemdCommands(t *testing.T) {
	unit := scopeUnit("overtime-pc-a01")
	if unit != "overtime-guest-overtime-pc-a01.scope" {
		t.Fatal(unit)
	}
	got := startScopeCommand(unit, "overtime.slice", "overtime-pc-a01", 4242)
	want := []string{
		"busctl", "call", "--system", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
		"org.freedesktop.systemd1.Manager", "StartTransientUnit", "ssa(sv)a(sa(sv))",
		"overtime-guest-overtime-pc-a01.scope", "fail",
		"5",
		"Description", "s", "Overtime compute guest overtime-pc-a01",
		"Slice", "s", "overtime.slice",
		"Delegate", "b", "true",
		"CollectMode", "s", "inactive-or-failed",
		"PIDs", "au", "1", "4242",
		"0",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("start scope:\n got %q\nwant %q", got, want)
	}
	// The property count matches the properties given.
	props := 0
	for i := 11; i < len(got)-1; {
		props++
		switch got[i+1] {
		case "au":
			i += 3 + mustAtoi(t, got[i+2])
		default:
			i += 3
		}
	}
	if props != mustAtoi(t, got[10]) {
		t.Fatalf("%d properties, count says %s", props, got[10])
	}
	stop := stopScopeCommand(unit)
	if strings.Join(stop[6:], " ") != "StopUnit ss overtime-guest-overtime-pc-a01.scope fail" {
		t.Fatalf("stop scope: %q", stop)
	}
	for in, want := range map[string]string{
		"overtime.slice":        "overtime.slice",
		"overtime-guests.slice": "overtime.slice/overtime-guests.slice",
		"a-b-c.slice":           "a.slice/a-b.slice/a-b-c.slice",
	} {
		if got := slicePath(in); got != want {
			t.Errorf("slicePath(%s) = %s, want %s", in, got, want)
		}
	}
	if got := scopeCgroup("overtime.slice", unit); got != "/overtime.slice/overtime-guest-overtime-pc-a01.scope/guest" {
		t.Fatal(got)
	}
}

func mustAtoi(t *testing.T, s string) int {
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

func TestNetworkCommands(t *testing.T) {
	v := hostVeth("overtime-a-very-long-host-name-indeed")
	if len(v) > 15 || v != hostVeth("overtime-a-very-long-host-name-indeed") || v == hostVeth("other") {
		t.Fatalf("hostVeth %q", v)
	}
	got := bridgedCommands("", "otv1", "br0", "02:00:00:00:00:01", 77)
	want := [][]string{
		{"ip", "link", "add", "otv1", "type", "veth", "peer", "name", "eth0", "address", "02:00:00:00:00:01", "netns", "77"},
		{"ip", "link", "set", "otv1", "master", "br0"},
		{"ip", "link", "set", "otv1", "up"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
	if got := bridgedCommands("ns1", "otv1", "br0", "", 77)[0]; strings.Join(got, " ") != "ip -n ns1 link add otv1 type veth peer name eth0 netns 77" {
		t.Fatalf("got %q", got)
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "img.sqfs")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &Backend{}
	ok := guest.Spec{Name: "overtime-a", MemoryMB: 64, BaseImage: dir, StateDir: filepath.Join(dir, "s")}
	l, err := b.validate(ok)
	if err != nil {
		t.Fatal(err)
	}
	if l.cfg.Format != "dir" || !reflect.DeepEqual(l.argv, []string{"/sbin/init"}) || l.cfg.Argv0 != "/sbin/init" || l.spec.Network != model.NetNone || l.cfg.TmpfsSize != 64<<20 {
		t.Fatalf("defaults: %+v", l.cfg)
	}
	s := ok
	s.BaseImage = file
	if l, err := b.validate(s); err != nil || l.cfg.Format != "squashfs" {
		t.Fatalf("squashfs inferred: %v", err)
	}
	for what, mod := range map[string]func(*guest.Spec){
		"invalid name":      func(s *guest.Spec) { s.Name = "Bad_Name" },
		"memoryMB":          func(s *guest.Spec) { s.MemoryMB = 8 },
		"no base image":     func(s *guest.Spec) { s.BaseImage = "" },
		"no such file":      func(s *guest.Spec) { s.BaseImage = filepath.Join(dir, "missing") },
		"not a directory":   func(s *guest.Spec) { s.BaseImage, s.BaseFormat = file, "dir" },
		"not a file":        func(s *guest.Spec) { s.BaseFormat = "squashfs" },
		"squashfs or dir":   func(s *guest.Spec) { s.BaseImage, s.BaseFormat = file, "qcow2" },
		"absolute path":     func(s *guest.Spec) { s.StateDir = "relative" },
		"overlayfs options": func(s *guest.Spec) { s.StateDir = "/run/a,b" },
		"without a bridge":  func(s *guest.Spec) { s.Network = model.NetBridged },
		"nat is not":        func(s *guest.Spec) { s.Network = model.NetNAT },
		"unterminated":      func(s *guest.Spec) { s.Cmdline = "/bin/sh -c 'x" },
	} {
		s := ok
		mod(&s)
		if _, err := b.validate(s); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("%s: got %v", what, err)
		}
	}
}

func TestAvailable(t *testing.T) {
	e := newEnv(t)
	b := e.backend(Options{})
	if err := b.Available(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.Kind() != model.BackendContainer {
		t.Fatal(b.Kind())
	}
	b = e.backend(Options{Exe: "/nonexistent/overtime"})
	if err := b.Available(context.Background()); !guest.IsUnavailable(err) {
		t.Fatalf("missing binary: %v", err)
	}
}
