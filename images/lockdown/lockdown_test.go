// Package lockdown holds the desktop's exam lockdown (overtime-exam.path, its service and
// the exam-lockdown helper, shipped in the overtime-agent package); its tests run the
// helper against a stand-in root with a recording systemctl.
package lockdown

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// recordingSystemctl appends its arguments, one call a line, to $SYSTEMCTL_LOG.
const recordingSystemctl = "#!/bin/sh\necho \"$*\" >>\"$SYSTEMCTL_LOG\"\n"

// logindBusctl answers HandlePowerKey as logind does once it has read the exam's drop-in
// (when the drop-in exists), else as by default.
const logindBusctl = "#!/bin/sh\nif [ -e \"$OVERTIME_EXAM_ROOT/run/systemd/logind.conf.d/99-overtime-exam.conf\" ]; then echo 's \"ignore\"'; else echo 's \"poweroff\"'; fi\n"

// TestExamLockdown: with /run/overtime/exam present the helper shuts SysRq, Ctrl-Alt-Del
// and logind's keys; once it is gone, it undoes exactly that. Each run follows the file,
// whatever state the previous run left (a repeated lock or unlock is harmless), and the
// file's contents (an exception's label) reach no output.
func TestExamLockdown(t *testing.T) {
	root, bin := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(recordingSystemctl), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "busctl"), []byte(logindBusctl), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"run/overtime", "proc/sys/kernel"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sysrq := filepath.Join(root, "proc/sys/kernel/sysrq")
	if err := os.WriteFile(sysrq, []byte("438\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(root, "systemctl.log")
	flag := filepath.Join(root, "run/overtime/exam")
	sysctlConf := filepath.Join(root, "run/sysctl.d/99-overtime-exam.conf")
	logindConf := filepath.Join(root, "run/systemd/logind.conf.d/99-overtime-exam.conf")
	run := func() (out, calls string) {
		t.Helper()
		_ = os.Remove(log)
		cmd := exec.Command("./exam-lockdown")
		cmd.Env = append(os.Environ(), "OVERTIME_EXAM_ROOT="+root, "SYSTEMCTL_LOG="+log, "PATH="+bin+":"+os.Getenv("PATH"))
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("exam-lockdown: %v\n%s", err, b)
		}
		c, _ := os.ReadFile(log)
		return string(b), string(c)
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v", err)
		}
		return string(b)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	const label = `BIO101 ; reboot $(poweroff) "x"`
	if err := os.WriteFile(flag, []byte(`{"mode":"desktop","label":"`+label+`","until":"2026-12-09T13:00:00+01:00"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		out, calls := run()
		if strings.Contains(out, "BIO101") || strings.TrimSpace(out) != "exam-lockdown: locked" {
			t.Errorf("lock output %q", out)
		}
		if got := read(sysrq); strings.TrimSpace(got) != "0" {
			t.Errorf("kernel.sysrq = %q during the exam", got)
		}
		if !strings.Contains(read(sysctlConf), "\nkernel.sysrq = 0\n") {
			t.Errorf("sysctl.d file:\n%s", read(sysctlConf))
		}
		logind := read(logindConf)
		for _, k := range []string{"[Login]", "HandlePowerKey=ignore", "HandlePowerKeyLongPress=ignore", "HandleRebootKey=ignore",
			"HandleSuspendKey=ignore", "HandleHibernateKey=ignore"} {
			if !strings.Contains(logind, "\n"+k+"\n") {
				t.Errorf("logind drop-in lacks %s:\n%s", k, logind)
			}
		}
		want := "mask --runtime --now ctrl-alt-del.target\nkill --kill-whom=main --signal=SIGHUP systemd-logind.service\n"
		if calls != want {
			t.Errorf("systemctl calls when locking:\n%s\nwant\n%s", calls, want)
		}
	}

	if err := os.Remove(flag); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		out, calls := run()
		if strings.TrimSpace(out) != "exam-lockdown: unlocked" {
			t.Errorf("unlock output %q", out)
		}
		if exists(sysctlConf) || exists(logindConf) {
			t.Errorf("lockdown files left after the exam")
		}
		want := "unmask --runtime ctrl-alt-del.target\nrestart systemd-sysctl.service\nkill --kill-whom=main --signal=SIGHUP systemd-logind.service\n"
		if calls != want {
			t.Errorf("systemctl calls when unlocking:\n%s\nwant\n%s", calls, want)
		}
	}
}

// TestUnits: the path unit watches the file the helper reads and starts its service;
// the helper passes shellcheck.
func TestUnits(t *testing.T) {
	path, err := os.ReadFile("overtime-exam.path")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"PathChanged=/run/overtime/exam", "Unit=overtime-exam.service", "WantedBy=paths.target"} {
		if !strings.Contains(string(path), "\n"+l+"\n") {
			t.Errorf("overtime-exam.path lacks %s", l)
		}
	}
	svc, err := os.ReadFile("overtime-exam.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(svc), "\nExecStart=/usr/lib/overtime/exam-lockdown\n") || !strings.Contains(string(svc), "\nType=oneshot\n") {
		t.Errorf("overtime-exam.service does not run the helper once per trigger:\n%s", svc)
	}
	needs.Servers(t, "shellcheck")
	if out, err := exec.Command("shellcheck", "-s", "sh", "exam-lockdown").CombinedOutput(); err != nil {
		t.Fatalf("shellcheck: %v\n%s", err, out)
	}
}
