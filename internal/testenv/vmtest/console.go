package vmtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Console is a VM's serial console: everything the guest prints is kept in memory (for
// Expect) and written to a log file as it arrives (for debugging a failed test); Send types
// a line.
//
// Expect consumes output: each call searches only what came after the end of the previous
// match, so a sequence of Expects follows the boot in order and an old line cannot satisfy
// a later Expect.
type Console struct {
	in io.Writer

	mu      sync.Mutex
	buf     []byte
	pos     int           // start of the unconsumed output
	changed chan struct{} // closed (and replaced) whenever buf grows or the stream ends
	eof     error         // why the stream ended, nil while it runs
	log     *os.File
	seq     int // Run markers

	// exitInfo, when set, says why the stream ended (QEMU's exit status and messages).
	exitInfo func() string
}

// newConsole starts copying out into the console; in receives Send's lines. logPath "" =
// no log file.
func newConsole(out io.Reader, in io.Writer, logPath string) (*Console, error) {
	c := &Console{in: in, changed: make(chan struct{})}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		c.log = f
	}
	go c.copy(out)
	return c, nil
}

func (c *Console) copy(out io.Reader) {
	if cl, ok := out.(io.Closer); ok {
		defer cl.Close()
	}
	b := make([]byte, 4096)
	for {
		n, err := out.Read(b)
		if n > 0 {
			c.mu.Lock()
			c.buf = append(c.buf, b[:n]...)
			if c.log != nil {
				_, _ = c.log.Write(b[:n])
			}
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
		}
		if err != nil {
			if err == io.EOF {
				err = errors.New("console closed (the VM has exited)")
			}
			c.mu.Lock()
			c.eof = err
			if c.log != nil {
				_ = c.log.Close()
			}
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
			return
		}
	}
}

// Expect waits until output after the previous match matches re, and returns the match
// and its submatches. It fails when within passes or the console ends first; the error
// quotes the tail of the output.
func (c *Console) Expect(re *regexp.Regexp, within time.Duration) ([]string, error) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		c.mu.Lock()
		if loc := re.FindSubmatchIndex(c.buf[c.pos:]); loc != nil {
			m := make([]string, len(loc)/2)
			for i := range m {
				if loc[2*i] >= 0 {
					m[i] = string(c.buf[c.pos+loc[2*i] : c.pos+loc[2*i+1]])
				}
			}
			c.pos += loc[1]
			c.mu.Unlock()
			return m, nil
		}
		changed, eof := c.changed, c.eof
		c.mu.Unlock()
		if eof != nil {
			info := ""
			if c.exitInfo != nil {
				info = " (" + c.exitInfo() + ")"
			}
			return nil, fmt.Errorf("console: %q not seen: %v%s; last output:\n%s", re, eof, info, c.Tail(3000))
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, fmt.Errorf("console: %q not seen within %v; last output:\n%s", re, within, c.Tail(3000))
		}
	}
}

// ExpectString is Expect for a literal string.
func (c *Console) ExpectString(s string, within time.Duration) error {
	_, err := c.Expect(regexp.MustCompile(regexp.QuoteMeta(s)), within)
	return err
}

// Send types line and a newline on the console.
func (c *Console) Send(line string) error {
	_, err := io.WriteString(c.in, line+"\n")
	if err != nil {
		return fmt.Errorf("console: send %q: %w", line, err)
	}
	return nil
}

// Run types a command for the guest's shell and returns what it printed, without the
// echo of the command line. A non-zero exit status is an error. The output is framed by
// two marker lines the shell prints; the markers are built by printf from pieces, so the
// echoed command line itself cannot match them.
func (c *Console) Run(cmd string, within time.Duration) (string, error) {
	c.mu.Lock()
	c.seq++
	n := c.seq
	c.mu.Unlock()
	line := fmt.Sprintf("printf 'OT-%%s-%d\\n' BEGIN; %s; printf 'OT-%%s-%d-%%s\\n' END $?", n, cmd, n)
	if err := c.Send(line); err != nil {
		return "", err
	}
	re := regexp.MustCompile(fmt.Sprintf(`(?s)OT-BEGIN-%d\r?\n(.*?)OT-END-%d-(\d+)\r?\n`, n, n))
	m, err := c.Expect(re, within)
	if err != nil {
		return "", fmt.Errorf("run %q: %w", cmd, err)
	}
	out := strings.ReplaceAll(m[1], "\r\n", "\n")
	if m[2] != "0" {
		return out, fmt.Errorf("run %q: exit status %s; output:\n%s", cmd, m[2], out)
	}
	return out, nil
}

// Output is everything the console printed so far.
func (c *Console) Output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}

// Tail is the last n bytes of the output.
func (c *Console) Tail(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.buf) <= n {
		return string(c.buf)
	}
	return "..." + string(c.buf[len(c.buf)-n:])
}
