package vmtest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// TestConsoleExpect: Expect finds output across writes, consumes it in order (an old line
// cannot satisfy a later Expect), times out with the tail of the output, and fails at once
// when the stream ends; everything lands in the log file.
func TestConsoleExpect(t *testing.T) {
	r, w := io.Pipe()
	logPath := filepath.Join(t.TempDir(), "console.log")
	c, err := newConsole(r, io.Discard, logPath)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.WriteString(w, "boot: step 1\r\nboot: st")
		_, _ = io.WriteString(w, "ep 2\r\n")
	}()
	m, err := c.Expect(regexp.MustCompile(`step (\d)`), 5*time.Second)
	if err != nil || m[1] != "1" {
		t.Fatalf("first Expect: %v %v", m, err)
	}
	m, err = c.Expect(regexp.MustCompile(`step (\d)`), 5*time.Second)
	if err != nil || m[1] != "2" {
		t.Fatalf("second Expect: %v %v (a consumed match must not count again)", m, err)
	}
	start := time.Now()
	_, err = c.Expect(regexp.MustCompile(`step 1`), 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not seen within") || !strings.Contains(err.Error(), "boot: step 2") {
		t.Errorf("Expect of consumed output: %v (want a timeout quoting the output)", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("timeout after %v", d)
	}
	go func() { _, _ = io.WriteString(w, "bye\n"); w.Close() }()
	start = time.Now()
	_, err = c.Expect(regexp.MustCompile(`never`), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "console closed") {
		t.Errorf("Expect after the end: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Error("Expect waited for its timeout although the console had ended")
	}
	log, _ := os.ReadFile(logPath)
	if string(log) != "boot: step 1\r\nboot: step 2\r\nbye\n" {
		t.Errorf("log file: %q", log)
	}
	if c.Output() != string(log) {
		t.Errorf("Output() = %q", c.Output())
	}
}

// TestConsoleRun: Run frames a command's output and status with markers, against a real
// shell (busybox sh reading commands from the pipe, as a guest shell does from the serial
// line, minus the echo).
func TestConsoleRun(t *testing.T) {
	needs.Servers(t, "busybox (Debian package busybox-static)")
	cmd := exec.Command("/bin/busybox", "sh")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("busybox (Debian package busybox-static): %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c, err := newConsole(stdout, stdin, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Run("echo $((6*7)); echo second line", 5*time.Second)
	if err != nil || out != "42\nsecond line\n" {
		t.Errorf("Run: %q, %v", out, err)
	}
	out, err = c.Run("echo failing; false", 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exit status 1") || out != "failing\n" {
		t.Errorf("Run of a failing command: %q, %v", out, err)
	}
	if out, err := c.Run("printf 'OT-%s-3\\n' BEGIN", 5*time.Second); err != nil || out != "OT-BEGIN-3\n" {
		t.Errorf("Run printing a marker of its own: %q, %v", out, err)
	}
}
