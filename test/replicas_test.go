package test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// replicaLab is two `overtime serve` replicas on one directory behind a real load
// balancer (haproxy, health-checking /readyz), as a computer centre runs the site
// manager when one server is not enough.
type replicaLab struct {
	t        *testing.T
	dir, bin string
	env      []string
	ports    map[string]int // replica name -> port
	procs    map[string]*exec.Cmd
	lbURL    string
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (l *replicaLab) url(name string) string {
	return fmt.Sprintf("http://127.0.0.1:%d", l.ports[name])
}

// start runs replica name (again, after a stop: a restart) and waits until it is ready.
func (l *replicaLab) start(name string) {
	t := l.t
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(l.dir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(l.bin, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", l.ports[name]), "--reload", "1s")
	cmd.Env = append(os.Environ(), l.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l.procs[name] = cmd
	bootlab.Eventually(t, name+" ready", 20*time.Second, func() bool { return httpOK(l.url(name) + "/readyz") })
}

func (l *replicaLab) stop(name string, sig syscall.Signal) {
	l.t.Helper()
	cmd := l.procs[name]
	_ = cmd.Process.Signal(sig)
	_ = cmd.Wait()
	delete(l.procs, name)
}

func httpOK(url string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

const haproxyConf = `global
	maxconn 512
defaults
	mode http
	timeout connect 1s
	timeout client 60s
	timeout server 60s
	# A request whose replica died before answering goes to another one.
	retries 3
	option redispatch 1
	retry-on conn-failure empty-response response-timeout
frontend api
	bind 127.0.0.1:%d
	default_backend replicas
backend replicas
	balance roundrobin
	option httpchk GET /readyz
	http-check expect status 200
	default-server inter 300ms fall 2 rise 2
	server a 127.0.0.1:%d check
	server b 127.0.0.1:%d check
`

func startReplicaLab(t *testing.T) *replicaLab {
	t.Helper()
	needs.Servers(t, "slapd", "haproxy")
	sl := slapdtest.StartT(t)
	l := &replicaLab{t: t, dir: t.TempDir(), bin: bootlab.Binary(t), procs: map[string]*exec.Cmd{},
		ports: map[string]int{"a": freeTCPPort(t), "b": freeTCPPort(t)}}
	l.env = []string{"OVERTIME_LDAP_URL=" + sl.URL, "OVERTIME_LDAP_BASE=" + sl.BaseDN, "OVERTIME_LDAP_BIND_DN=" + sl.ServiceDN,
		"OVERTIME_LDAP_PASSWORD=" + sl.ServicePW}
	initCmd := exec.Command(l.bin, "ldap", "init", "--site", "example", "--timezone", "Europe/Berlin", "--admin", "admin")
	initCmd.Env = append(os.Environ(), l.env...)
	initCmd.Env = append(initCmd.Env, "OVERTIME_LDAP_BIND_DN="+sl.RootDN, "OVERTIME_LDAP_PASSWORD="+sl.RootPW, "OVERTIME_ADMIN_PASSWORD="+testenv.AdminPassword)
	if out, err := initCmd.CombinedOutput(); err != nil {
		t.Fatalf("ldap init: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		for name := range l.procs {
			l.stop(name, syscall.SIGKILL)
		}
		if t.Failed() {
			for _, name := range []string{"a", "b", "haproxy"} {
				if b, err := os.ReadFile(filepath.Join(l.dir, name+".log")); err == nil {
					t.Logf("%s.log:\n%s", name, tail(string(b), 3000))
				}
			}
		}
	})
	l.start("a")
	l.start("b")

	lbPort := freeTCPPort(t)
	conf := filepath.Join(l.dir, "haproxy.cfg")
	if err := os.WriteFile(conf, fmt.Appendf(nil, haproxyConf, lbPort, l.ports["a"], l.ports["b"]), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(l.dir, "haproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	lb := exec.Command("haproxy", "-db", "-f", conf)
	lb.Stdout, lb.Stderr = logf, logf
	lb.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := lb.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Process.Kill(); _ = lb.Wait() })
	l.lbURL = fmt.Sprintf("http://127.0.0.1:%d", lbPort)
	bootlab.Eventually(t, "haproxy answering", 20*time.Second, func() bool { return httpOK(l.lbURL + "/readyz") })
	return l
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Two site manager replicas behind haproxy, node agent heartbeats under load through it:
// killing one replica (SIGKILL, no chance to flush) loses no heartbeat the load balancer
// acknowledged and leaves the agents' posts failing for at most the health check's
// reaction time; both replicas answer the same; a replica restarted afterwards and the
// other one stopped, the survivor answers with everything, job reports included.
func TestReplicaFailover(t *testing.T) {
	l := startReplicaLab(t)
	ctx := context.Background()
	admin := &client.Client{BaseURL: l.lbURL, User: "admin", Password: testenv.AdminPassword}
	if err := admin.Send("PUT", "/api/v1/site", nil, testenv.ExampleSite(t), nil); err != nil {
		t.Fatal(err)
	}
	const host = "pc-a01"
	bootlab.Eventually(t, "both replicas have the site", 10*time.Second, func() bool {
		for _, r := range []string{"a", "b"} {
			c := &client.Client{BaseURL: l.url(r), User: "admin", Password: testenv.AdminPassword}
			if err := c.Send("GET", "/api/v1/hosts/"+host, nil, nil, nil); err != nil {
				return false
			}
		}
		return true
	})
	cred, err := admin.CreateHostCredential(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	agent := client.NewWithToken(l.lbURL, cred.Token)
	agent.HTTP = &http.Client{Timeout: 5 * time.Second}

	// The load: an agent posting a heartbeat every 20 ms (a real one posts every 30 s
	// and on every change; 20 ms is a room's worth of PCs), with its owner state
	// alternating so that every post is a change the directory must learn.
	type failure struct {
		at  time.Time
		err error
	}
	var (
		mu       sync.Mutex
		acked    uint64
		failures []failure
	)
	stop := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for seq := uint64(1); ; seq++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			state := model.StateNoUser
			if seq%2 == 0 {
				state = model.StateOwnerActive
			}
			err := agent.Heartbeat(ctx, wire.Heartbeat{Host: host, Instance: "agent-1", Seq: seq, Time: time.Now(),
				Mode: "desktop", OwnerState: state, Action: model.ActionRun, GuestState: "running"})
			mu.Lock()
			if err != nil {
				failures = append(failures, failure{time.Now(), err})
			} else {
				acked = seq
			}
			mu.Unlock()
		}
	}()
	lastAcked := func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		return acked
	}
	seenBy := func(base string, min uint64) bool {
		c := &client.Client{BaseURL: base, User: "admin", Password: testenv.AdminPassword, HTTP: &http.Client{Timeout: 2 * time.Second}}
		st, err := c.AgentStatusOf(ctx, host)
		return err == nil && st.Seq >= min
	}
	bootlab.Eventually(t, "heartbeats flowing", 10*time.Second, func() bool { return lastAcked() >= 20 })
	// Both replicas see what either received.
	mark := lastAcked()
	bootlab.Eventually(t, "replica a and b both see the acknowledged heartbeats", 10*time.Second, func() bool {
		return seenBy(l.url("a"), mark) && seenBy(l.url("b"), mark)
	})

	// Kill a: whatever it acknowledged must be on b, and posts go on through b.
	killed := time.Now()
	l.stop("a", syscall.SIGKILL)
	ackedAtKill := lastAcked()
	bootlab.Eventually(t, "posts continuing after the kill", 10*time.Second, func() bool { return lastAcked() >= ackedAtKill+50 })
	if !seenBy(l.url("b"), ackedAtKill) {
		t.Errorf("b does not have heartbeat %d, acknowledged before a was killed", ackedAtKill)
	}
	mu.Lock()
	for _, f := range failures {
		if f.at.Sub(killed) > 2*time.Second || f.at.Before(killed) {
			t.Errorf("a post failed at %s (kill at %s): %v", f.at.Format(time.StampMilli), killed.Format(time.StampMilli), f.err)
		}
	}
	t.Logf("killing replica a: %d of the posts failed (all within the failover window)", len(failures))
	mu.Unlock()

	// A job report through the load balancer, then a restarted a and b stopped.
	jr := wire.JobReport{Job: "991", Host: host, Start: time.Now().Add(-time.Minute), End: time.Now(), Seconds: 60, ThrottledSeconds: 7}
	if _, err := agent.PostJobReport(ctx, jr); err != nil {
		t.Fatal(err)
	}
	l.start("a")
	bootlab.Eventually(t, "haproxy sees a again", 10*time.Second, func() bool { return seenBy(l.url("a"), lastAcked()) })
	ackedBeforeStop := lastAcked()
	l.stop("b", syscall.SIGTERM)
	stopped := time.Now()
	bootlab.Eventually(t, "posts continuing after b stopped", 10*time.Second, func() bool { return lastAcked() >= ackedBeforeStop+50 })
	close(stop)
	<-loadDone
	if !seenBy(l.lbURL, lastAcked()) {
		t.Errorf("the survivor does not have the last acknowledged heartbeat %d", lastAcked())
	}
	if r, err := admin.JobReport(ctx, "991", host); err != nil || r.ThrottledSeconds != 7 {
		t.Errorf("job report after both replicas restarted or stopped: %+v %v", r, err)
	}
	mu.Lock()
	for _, f := range failures {
		if f.at.After(stopped) {
			t.Errorf("a post failed after b was stopped gracefully: %v", f.err)
		}
	}
	mu.Unlock()
}
