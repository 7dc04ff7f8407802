// Package cupstest runs a throwaway CUPS print server (Debian's cupsd) for the tests of
// the desktops' printing configuration: one raw queue, listening on a free loopback
// port, with its spool in a temporary directory, so a test can see which jobs arrived,
// from whom, with what data. Stopped when the test ends.
package cupstest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// Server is a running cupsd.
type Server struct {
	Addr  string // host:port, what a client.conf's ServerName names
	Queue string // the one queue
	Dir   string
	log   *bytes.Buffer
	cmd   func(name string, args ...string) *exec.Cmd
}

// Options place the server: by default on a free port of 127.0.0.1 in the test's own
// network namespace.
type Options struct {
	// Addr to listen on, e.g. a lab's server address (10.20.0.1:631). cupsd accepts
	// only local host names from local clients (its defence against DNS rebinding), so a
	// server that PCs reach at a network address must listen there itself: a port
	// forwarded from the PCs' network to 127.0.0.1 would be refused.
	Addr string
	// Command runs cupsd and the test's lpstat (e.g. a network namespace's
	// Command); nil: exec.Command.
	Command func(name string, args ...string) *exec.Cmd
}

// Job is a job that reached the server.
type Job struct {
	ID   int
	User string
	Data string // the document as spooled
}

// Start starts cupsd with one raw queue named queue on 127.0.0.1.
func Start(t testing.TB, queue string) *Server {
	t.Helper()
	return StartWith(t, queue, Options{})
}

// StartWith starts cupsd with one raw queue named queue where opt says.
func StartWith(t testing.TB, queue string, opt Options) *Server {
	t.Helper()
	needs.Servers(t, "root", "cupsd, lpstat (Debian packages cups-daemon, cups-client)")
	dir := t.TempDir()
	for _, d := range []string{"etc", "spool", "cache", "state", "tmp", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	run := opt.Command
	if run == nil {
		run = exec.Command
	}
	addr := opt.Addr
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	files := map[string]string{
		"cups-files.conf": fmt.Sprintf(`ServerRoot %[1]s/etc
RequestRoot %[1]s/spool
CacheDir %[1]s/cache
StateDir %[1]s/state
TempDir %[1]s/tmp
AccessLog %[1]s/log/access_log
ErrorLog %[1]s/log/error_log
PageLog %[1]s/log/page_log
SystemGroup root
`, dir),
		"cupsd.conf": fmt.Sprintf(`Listen %s
LogLevel info
WebInterface No
Browsing Off
DefaultAuthType None
PreserveJobFiles Yes
<Location />
  Order allow,deny
  Allow all
</Location>
# Job owners are private to other users by default (lpstat shows "unknown"); the test
# reads them from any address.
<Policy default>
  JobPrivateAccess all
  JobPrivateValues none
  <Limit All>
    Order deny,allow
  </Limit>
</Policy>
`, addr),
		// No PPD: a raw queue, which keeps what arrives as it was sent. The device is
		// /dev/null: what counts is that the job reached the server, as whom, with what.
		"printers.conf": fmt.Sprintf("<Printer %s>\nInfo Test queue\nDeviceURI file:///dev/null\nState Idle\nAccepting Yes\nShared Yes\n</Printer>\n", queue),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, "etc", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := run("/usr/sbin/cupsd", "-f", "-c", filepath.Join(dir, "etc/cupsd.conf"), "-s", filepath.Join(dir, "etc/cups-files.conf"))
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("cupsd: %v", err)
	}
	s := &Server{Addr: addr, Queue: queue, Dir: dir, log: &log, cmd: run}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	if !poll.Wait(10*time.Second, func() bool {
		return run("lpstat", "-h", addr, "-p", queue).Run() == nil
	}) {
		t.Fatalf("cupsd did not answer on %s:\n%s", addr, s.Logs())
	}
	return s
}

// jobLineRE: a line of `lpstat -W completed -o QUEUE`: "QUEUE-ID USER SIZE DATE".
var jobLineRE = regexp.MustCompile(`^(\S+)-([0-9]+)\s+(\S+)\s`)

// Jobs are the jobs the server completed, oldest first.
func (s *Server) Jobs(t testing.TB) []Job {
	t.Helper()
	out, err := s.cmd("lpstat", "-h", s.Addr, "-W", "completed", "-o", s.Queue).CombinedOutput()
	if err != nil {
		t.Fatalf("lpstat: %v\n%s", err, out)
	}
	var jobs []Job
	for _, l := range strings.Split(string(out), "\n") {
		m := jobLineRE.FindStringSubmatch(l)
		if m == nil || m[1] != s.Queue {
			continue
		}
		id, _ := strconv.Atoi(m[2])
		data, _ := os.ReadFile(filepath.Join(s.Dir, "spool", fmt.Sprintf("d%05d-001", id)))
		jobs = append(jobs, Job{ID: id, User: m[3], Data: string(data)})
	}
	return jobs
}

// Logs is cupsd's output and error log, for failure messages.
func (s *Server) Logs() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "log/error_log"))
	return s.log.String() + string(b)
}
