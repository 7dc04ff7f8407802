package test

import (
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
)

// The exam at a booted desktop: the PC restarts into it, its seat is locked (no text
// console, no user switching, SysRq, Ctrl-Alt-Del and the power button do nothing) and
// its network reaches the exam's server and what the PC needs, nothing else.

// Two servers of the campus network at addresses of their own: the exam's (allowed by
// the exam) and another one (not).
const (
	examServer  = "10.20.0.7:8000"
	otherServer = "10.20.0.6:8000"
)

// startCampusServers starts both in the lab's network: each answers a connection with a
// line naming itself.
func startCampusServers(t *testing.T, l *bootlab.Lab) {
	t.Helper()
	for addr, name := range map[string]string{examServer: "EXAM-SERVER", otherServer: "OTHER-SERVER"} {
		host, _, _ := net.SplitHostPort(addr)
		if out, err := l.NS.Command("ip", "addr", "add", host+"/24", "dev", bootlab.Bridge).CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s: %v\n%s", host, err, out)
		}
		ln, err := l.NS.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func(ln net.Listener, name string) {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte(name + "\n"))
				c.Close()
			}
		}(ln, name)
	}
}

// reach is what the student's shell gets from a campus server: its line, or the error.
func reach(t *testing.T, g *graphicalSeat, addr string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	out, _ := g.vm.Console.Run("timeout 10 bash -c 'exec 3<>/dev/tcp/"+host+"/"+port+" && head -1 <&3' 2>&1; echo rc=$?", time.Minute)
	return out
}

// The console carries the journal too: a command's output is read line by line.
// bootID is the kernel's random id of this boot. (uptime -s is now minus uptime and
// moves by a second between two reads on a TCG guest, so it cannot tell two boots apart.)
var bootID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// line: out has a line that is exactly want.
func line(out, want string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimRight(l, "\r") == want {
			return true
		}
	}
	return false
}

// rebootOrPowerOff is what the console shows when the PC goes down.
var rebootOrPowerOff = regexp.MustCompile(`reboot: |Power down|systemd-shutdown|Reached target [^\n]*(Reboot|Power-Off|Shutdown)|sysrq: Resetting`)

// checkExam: the PC booted into an exam shows its greeter; the student is logged in on
// the console. Locked: SysRq off, the seat cannot switch users, X is on its VT and stays
// there when Ctrl-Alt-F2 is pressed; SysRq-B, Ctrl-Alt-Del and the power button do not
// take the PC down. The exam's server answers, the other does not. The student stays
// logged in on the console.
func checkExam(t *testing.T, g *graphicalSeat, expect func(string, time.Duration)) {
	g.waitSession("LightDM's greeter in the exam", "lightdm", "greeter", greeterWithin)
	g.waitDrawn("exam-greeter", greeterWithin)
	var state string
	// In force means all of it: SysRq off, Ctrl-Alt-Del masked and logind ignoring the
	// power key (it reads its drop-in on SIGHUP, in its own time).
	bootlab.Eventually(t, "the exam's lockdown in force", 3*time.Minute, func() bool {
		out, err := g.vm.Console.Run("test -e /run/overtime/exam && cat /proc/sys/kernel/sysrq /sys/class/tty/tty0/active && dm-tool list-seats && "+
			"systemctl is-enabled ctrl-alt-del.target; busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager HandlePowerKey", time.Minute)
		state = out
		return err == nil && line(out, "0") && line(out, "masked-runtime") && line(out, `s "ignore"`)
	})
	if !line(state, "tty7") || !strings.Contains(state, "CanSwitch=false") {
		t.Fatalf("the exam's seat: %q, want SysRq 0, X on tty7, a seat that cannot switch users", state)
	}
	out, err := g.vm.Console.Run("cat /proc/sys/kernel/random/boot_id", time.Minute)
	booted := bootID.FindString(out)
	if err != nil || booted == "" {
		t.Fatalf("boot_id: %q %v", out, err)
	}
	mon := g.vm.Monitor()
	for _, keys := range [][]string{{"ctrl", "alt", "f2"}, {"alt", "sysrq", "b"}, {"ctrl", "alt", "delete"}} {
		if err := mon.SendKey(100*time.Millisecond, keys...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := mon.Command("system_powerdown", nil); err != nil { // the ACPI power button
		t.Fatal(err)
	}
	// Nothing may happen: the console is watched for the PC going down for half a
	// minute (a restart or power-off starts within seconds of its key).
	if m, err := g.vm.Console.Expect(rebootOrPowerOff, 30*time.Second); err == nil {
		t.Fatalf("a key took the PC down in the exam: %q", m[0])
	}
	now, err := g.vm.Console.Run("cat /proc/sys/kernel/random/boot_id /sys/class/tty/tty0/active", time.Minute)
	if err != nil || bootID.FindString(now) != booted || !line(now, "tty7") {
		t.Fatalf("after the keys: %q (booted %q), want the same boot on tty7: %v", now, booted, err)
	}
	g.shot("exam-after-keys")

	if got := reach(t, g, examServer); !strings.Contains(got, "EXAM-SERVER") {
		t.Errorf("the exam's server from the exam: %q", got)
	}
	if got := reach(t, g, otherServer); strings.Contains(got, "OTHER-SERVER") || strings.Contains(got, "rc=0") {
		t.Errorf("another server from the exam: %q, want no answer", got)
	}
}
