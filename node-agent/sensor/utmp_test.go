package sensor

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// utmpRecord is a glibc x86-64 struct utmp (384 bytes) as login(1), sshd and display
// managers write it: ut_type, ut_pid, ut_line, ut_id, ut_user, ut_host, ut_tv.
func utmpRecord(typ int16, pid int, line, user, host string) []byte {
	b := make([]byte, utmpSize)
	binary.NativeEndian.PutUint16(b[0:], uint16(typ))
	binary.NativeEndian.PutUint32(b[utmpOffPID:], uint32(pid))
	copy(b[utmpOffLine:utmpOffLine+utmpLenLine], line)
	if len(line) > 4 {
		copy(b[40:44], line[len(line)-4:]) // ut_id: the line's suffix, as login does
	}
	copy(b[utmpOffUser:utmpOffUser+utmpLenUser], user)
	copy(b[utmpOffHost:utmpOffHost+utmpLenHost], host)
	binary.NativeEndian.PutUint32(b[340:], uint32(time.Now().Unix())) // ut_tv.tv_sec
	return b
}

// writeUtmp replaces path with the records, by rename as an atomic update.
func writeUtmp(t *testing.T, path string, recs ...[]byte) {
	t.Helper()
	var b []byte
	for _, r := range recs {
		b = append(b, r...)
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// openPTY opens a real pseudo-terminal pair: the master from /dev/ptmx (posix_openpt),
// unlocked (unlockpt; grantpt has nothing to do on devpts), and its slave /dev/pts/N.
func openPTY(t *testing.T) (master, slave *os.File, line string) {
	t.Helper()
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	master = os.NewFile(uintptr(mfd), "ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	line = fmt.Sprintf("pts/%d", n)
	slave, err = os.OpenFile("/dev/"+line, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave, line
}

func expectSessions(t *testing.T, out <-chan Event, local, remote int, what string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-out:
			if !ok {
				t.Fatalf("%s: the sensor stopped", what)
			}
			if ev.Kind != KindSessions {
				continue
			}
			if ev.Source != "utmp" || ev.Sessions.Local != local || ev.Sessions.Remote != remote || ev.Sessions.AllIdle {
				t.Fatalf("%s: sessions event %+v, want local %d remote %d", what, ev, local, remote)
			}
			return
		case <-deadline:
			t.Fatalf("%s: no sessions event within 5s", what)
		}
	}
}

// TestUtmp: sessions from a utmp file in glibc's binary format and activity on a real
// pseudo-terminal. Only live USER_PROCESS entries count, a host makes a session remote
// (an X display does not); a replaced file and a session process that exits without a
// utmp update are both noticed; a read on the session's terminal is input, output on it is
// not.
func TestUtmp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "utmp")
	master, slave, line := openPTY(t)

	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	me := os.Getpid()
	base := [][]byte{
		utmpRecord(utmpUserProcess, me, line, "alice", ""),
		utmpRecord(utmpUserProcess, dead.Process.Pid, "pts/99", "bob", "192.0.2.9"), // process gone
		utmpRecord(6 /* LOGIN_PROCESS */, me, "tty1", "LOGIN", ""),
		utmpRecord(utmpUserProcess, me, ":0", "carol", ":0"), // an X session: local
		utmpRecord(8 /* DEAD_PROCESS */, me, "pts/98", "", "192.0.2.8"),
	}
	writeUtmp(t, path, base...)

	out := runSensor(t, &Utmp{Path: path})
	expectSessions(t, out, 2, 0, "start")

	// Output on the terminal is no input.
	if _, err := slave.Write([]byte("build output\r\n")); err != nil {
		t.Fatal(err)
	}
	noEvent(t, out, 300*time.Millisecond, "output on the terminal")

	// A key typed (the master side is what sshd or a terminal emulator writes), read by
	// the session's program on the slave: input.
	if _, err := master.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	buf := make([]byte, 16)
	if _, err := slave.Read(buf); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, out, 2*time.Second, "input on "+line)
	if ev.Kind != KindInput || ev.Source != "tty:"+line {
		t.Fatalf("event %+v, want input from tty:%s", ev, line)
	}
	t.Logf("terminal read to event: %v", time.Since(start))

	// A remote login (a process of its own), written by replacing the file.
	child := exec.Command("cat")
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	writeUtmp(t, path, append(base, utmpRecord(utmpUserProcess, child.Process.Pid, line, "dave", "198.51.100.4"))...)
	expectSessions(t, out, 2, 1, "remote login")

	// Its process ends without anyone updating utmp (a crash): the pidfd says so.
	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatal(err)
	}
	expectSessions(t, out, 2, 0, "remote session's process exited")

	// Logout of the local session: login marks its record DEAD_PROCESS in place.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(utmpRecord(8, me, line, "", ""), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	expectSessions(t, out, 1, 0, "local logout")
	// Its terminal is no longer watched.
	if _, err := master.Write([]byte("y\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := slave.Read(buf); err != nil {
		t.Fatal(err)
	}
	noEvent(t, out, 300*time.Millisecond, "input on a terminal without session")
}

// TestParseUtmp: the record layout (a torn last record is ignored).
func TestParseUtmp(t *testing.T) {
	b := append(utmpRecord(utmpUserProcess, 4242, "pts/7", "erin", "203.0.113.5"), make([]byte, 100)...)
	es := parseUtmp(b)
	if len(es) != 1 {
		t.Fatalf("%d entries", len(es))
	}
	e := es[0]
	if e.typ != utmpUserProcess || e.pid != 4242 || e.line != "pts/7" || e.user != "erin" || e.host != "203.0.113.5" || !e.remote() {
		t.Errorf("parsed %+v", e)
	}
}
