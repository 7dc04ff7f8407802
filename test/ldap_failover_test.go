package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
	"github.com/overtime-hpc/overtime/sitemgmt/ldapstore"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// The site's directory survives the loss of one LDAP server: `overtime ldap init` and
// `overtime serve` are given two multi-provider slapds (--ldap-url "URL1,URL2" and
// "URL1 URL2"), API load runs (logins that reach the directory, reads, host writes, boot
// scripts), and provider 1 is killed with SIGKILL. After a failover window of at most
// failoverBound no request gets a 503 or any other unexpected status, boot scripts keep
// rendering, host writes keep succeeding (on provider 2), a wrong password is still a
// 401 and a right one still logs in; after provider 1 restarts it holds the hosts
// written during the outage.
func TestLDAPFailover(t *testing.T) {
	const failoverBound = 2 * time.Second
	s := slapdtest.StartReplicatedT(t, 2, slapdenv.Options{})
	bin := bootlab.Binary(t)
	root := testenv.RepoRoot(t)

	env := append(os.Environ(), "OVERTIME_LDAP_BASE="+s[0].BaseDN)
	initCmd := exec.Command(bin, "ldap", "init", "--ldap-url", s[0].URL+","+s[1].URL, "--bind-dn", s[0].RootDN, "--site", "example")
	initCmd.Env = append(env, "OVERTIME_LDAP_PASSWORD="+s[0].RootPW, "OVERTIME_ADMIN_PASSWORD="+testenv.AdminPassword)
	if out, err := initCmd.CombinedOutput(); err != nil {
		t.Fatalf("overtime ldap init: %v\n%s", err, out)
	}

	addr := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t)) // replicas_test.go
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(bin, "serve", "--listen", addr, "--ldap-url", s[0].URL+" "+s[1].URL,
		"--bind-dn", s[0].ServiceDN, "--reload", "1s", "--now", "2026-12-02T10:30:00+01:00",
		// The wrong-password load states its client addresses (X-Forwarded-For), so that
		// the login throttle slows neither it nor the right-password load.
		"--trusted-proxy", "127.0.0.1/32")
	serve.Dir = root
	serve.Env = append(env, "OVERTIME_LDAP_PASSWORD="+s[0].ServicePW)
	serve.Stdout, serve.Stderr = logf, logf
	serve.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("serve.log:\n%s", b)
		}
	})
	base := "http://" + addr
	hc := &http.Client{Timeout: 15 * time.Second}
	bootlab.Eventually(t, "overtime serve answering", 30*time.Second, func() bool {
		resp, err := hc.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	admin := &client.Client{BaseURL: base, User: "admin", Password: testenv.AdminPassword}
	if err := admin.Send("PUT", "/api/v1/site", nil, testenv.ExampleSite(t), nil); err != nil {
		t.Fatalf("apply the example site: %v", err)
	}

	// Users for wrong passwords: spread over enough names and client addresses that no
	// name or address reaches the login throttle's free failures while the test runs, so
	// that every wrong password is a bind the directory must answer.
	const guessers = 40
	for j := 0; j < guessers; j++ {
		if err := admin.Send("POST", "/api/v1/users", nil, map[string]string{"uid": fmt.Sprintf("guess%02d", j), "password": "guess-secret-password"}, nil); err != nil {
			t.Fatalf("add a user: %v", err)
		}
	}

	// requestFrom sends one request, from the client address from (X-Forwarded-For; ""
	// none), and returns its status (0 when the server did not answer).
	requestFrom := func(from, method, path, user, pw string, body any) (int, string) {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		if user != "" {
			req.SetBasicAuth(user, pw)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if from != "" {
			req.Header.Set("X-Forwarded-For", from)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	request := func(method, path, user, pw string, body any) (int, string) {
		return requestFrom("", method, path, user, pw, body)
	}

	var (
		killAt   atomic.Int64 // unix nanos of the SIGKILL; 0 before
		mu       sync.Mutex
		problems []string
		n503     atomic.Int64
		total    atomic.Int64
		lastBad  atomic.Int64 // start of the last failed request, unix nanos
		hosts    []string     // hosts whose POST succeeded
	)
	check := func(what string, started time.Time, code int, body string, want ...int) {
		total.Add(1)
		for _, w := range want {
			if code == w {
				return
			}
		}
		if code == http.StatusServiceUnavailable {
			n503.Add(1)
		}
		if started.UnixNano() > lastBad.Load() {
			lastBad.Store(started.UnixNano())
		}
		ka := killAt.Load()
		if ka != 0 && started.Before(time.Unix(0, ka).Add(failoverBound)) {
			return // inside the failover window: tolerated, but counted and timed
		}
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			since := "before the kill"
			if ka != 0 {
				since = fmt.Sprintf("%v after the kill", started.Sub(time.Unix(0, ka)).Round(time.Millisecond))
			}
			problems = append(problems, fmt.Sprintf("%s (started %s): status %d, want %v: %s", what, since, code, want, strings.TrimSpace(body)))
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	loop := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				f(i)
			}
		}()
	}
	loop(func(i int) { // logins the directory must answer: a wrong password is never cached
		st := time.Now()
		code, body := requestFrom(fmt.Sprintf("198.51.100.%d", i%250), "GET", "/api/v1/hosts", fmt.Sprintf("guess%02d", i%guessers), fmt.Sprintf("wrong-%d", i), nil)
		check("wrong-password login", st, code, body, http.StatusUnauthorized)
	})
	loop(func(int) { // reads as a logged-in user
		st := time.Now()
		code, body := request("GET", "/api/v1/hosts", "admin", testenv.AdminPassword, nil)
		check("GET /api/v1/hosts", st, code, body, http.StatusOK)
	})
	loop(func(int) { // boot scripts: rendered from the snapshot, whatever the directory does
		st := time.Now()
		code, body := request("GET", "/boot/ipxe/52:54:00:0a:00:01", "", "", nil)
		if code == http.StatusOK && !strings.Contains(body, "#!ipxe") {
			code = -1
		}
		check("GET /boot/ipxe/pc-a01", st, code, body, http.StatusOK)
	})
	loop(func(i int) { // writes: one new host each
		name := fmt.Sprintf("pc-f%03d", i)
		st := time.Now()
		code, body := request("PUT", "/api/v1/hosts/"+name, "admin", testenv.AdminPassword,
			model.Host{Name: name, MAC: fmt.Sprintf("52:54:00:ff:%02x:%02x", i/256, i%256), Pool: "lab-b"})
		check("PUT host "+name, st, code, body, http.StatusCreated, http.StatusOK)
		if code == http.StatusCreated || code == http.StatusOK {
			mu.Lock()
			hosts = append(hosts, name)
			mu.Unlock()
		}
	})
	written := func() int { mu.Lock(); defer mu.Unlock(); return len(hosts) }

	bootlab.Eventually(t, "writes before the kill", 30*time.Second, func() bool { return written() >= 3 })
	killAt.Store(time.Now().UnixNano())
	if err := syscall.Kill(s[0].PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := s[0].Stop(); err != nil { // reaps it
		t.Fatal(err)
	}
	atKill := written()
	// The load runs on for well beyond the failover window, with writes landing on
	// provider 2.
	bootlab.Eventually(t, "writes after the kill", 30*time.Second, func() bool {
		return written() >= atKill+5 && time.Since(time.Unix(0, killAt.Load())) > 3*failoverBound
	})
	close(stop)
	wg.Wait()

	if lb := lastBad.Load(); lb != 0 {
		t.Logf("last failed request started %v after the kill", time.Unix(0, lb).Sub(time.Unix(0, killAt.Load())).Round(time.Millisecond))
	}
	t.Logf("%d requests, %d answered 503; %d hosts written, %d after the kill", total.Load(), n503.Load(), written(), written()-atKill)
	for _, p := range problems {
		t.Error(p)
	}
	if code, body := request("GET", "/readyz", "", "", nil); code != http.StatusOK {
		t.Errorf("/readyz after the failover: %d %s", code, body)
	}

	// Provider 1 comes back and receives what was written while it was dead.
	if err := s[0].Restart(); err != nil {
		t.Fatal(err)
	}
	last := func() string { mu.Lock(); defer mu.Unlock(); return hosts[len(hosts)-1] }()
	bootlab.Eventually(t, "provider 1 holds "+last, 30*time.Second, func() bool {
		one, err := ldapstore.Open(ldapstore.Config{URL: s[0].URL, BaseDN: s[0].BaseDN, BindDN: s[0].ServiceDN, BindPassword: s[0].ServicePW, Timeout: 2 * time.Second})
		if err != nil {
			return false
		}
		defer one.Close()
		site, err := one.Load(context.Background())
		return err == nil && site.Host(last) != nil
	})
}
