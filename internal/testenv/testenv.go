// Package testenv starts the site manager for tests the way production runs it: a real
// slapd (internal/slapdenv) bootstrapped by ldapstore.Init, the service, and the HTTP API
// on a loopback listener. Everything is torn down by t.Cleanup.
//
// The packages below internal/testenv are the other test environments (labs of real
// servers, VMs, Slurm, synthetic sites) and their helpers. Production code imports none
// of them, and so links no testing package: the binaries' TestBinaryDeps check that. The
// helpers the binaries share with tests (internal/slapdenv for `overtime-dev slapd`,
// internal/netns for `overtime-dev forward`, internal/tools) live outside. Every
// environment that needs real servers or root skips under -short (needs.Servers).
package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
	"github.com/overtime-hpc/overtime/internal/testenv/unidir"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/sitemgmt/ldapstore"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/sitemgmt/sitefile"
	"github.com/overtime-hpc/overtime/vocab/capin"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// AdminPassword is the first site admin's password in every test environment.
const AdminPassword = "admin-secret"

// Env is a running site manager.
type Env struct {
	Slapd  *slapdenv.Server
	Store  *ldapstore.Store
	Svc    *service.Service
	API    *api.Server
	HTTP   *httptest.Server
	Now    time.Time
	Client func(user, password string) *client.Client
	// ImagesDir is the image store the API serves and accepts uploads into
	// (Options.API.ImagesDir; "" when the test gave none).
	ImagesDir string
	// CAFile and CAPin are the test's site CA and its pin when Options.TLS ("" else).
	CAFile, CAPin string
	// TLSConfig is the server side of the API's TLS (Options.TLS; nil else): a lab that
	// serves Env.API on an address of its own (a network namespace's) wraps its listener
	// with it.
	TLSConfig *tls.Config
}

// Options tune New.
type Options struct {
	Now      time.Time              // fixed clock for boot endpoints and mode-at (default 2026-12-02 10:30 Berlin, a Wednesday lecture)
	Wrap     func(c *client.Client) // e.g. install an OpenAPI-validating transport
	Timezone string
	API      api.Options // boot file directories etc.; Now and Log are set by New
	// TLS serves the API over HTTPS with a certificate for 127.0.0.1 from a CA made for
	// the test, the CA at the end of the chain (as `overtime serve --tls-cert` is given
	// it): host credentials issued then pin it (api.Options.CAPin). Env.CAFile is the
	// CA's certificate; Env.Client trusts it.
	TLS bool
	// TLSIPs are further addresses the server's certificate is valid for (Options.TLS):
	// a lab's own listener for Env.API.
	TLSIPs []net.IP
}

// RepoRoot finds the repository root (the directory holding go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// New starts slapd, initialises the directory with site admin "admin", and serves the API.
func New(t testing.TB, opt Options) *Env {
	t.Helper()
	needs.Servers(t, "slapd")
	if opt.Now.IsZero() {
		loc, _ := time.LoadLocation("Europe/Berlin")
		opt.Now = time.Date(2026, 12, 2, 10, 30, 0, 0, loc)
	}
	if opt.Timezone == "" {
		opt.Timezone = "Europe/Berlin"
	}
	sl := slapdtest.StartT(t)
	store, err := ldapstore.Open(ldapstore.Config{URL: sl.URL, BaseDN: sl.BaseDN, BindDN: sl.RootDN, BindPassword: sl.RootPW})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	if err := store.Init(ctx, ldapstore.InitOptions{SiteName: "example", Timezone: opt.Timezone, AdminUID: "admin", AdminPassword: AdminPassword}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := service.New(ctx, store, log)
	if err != nil {
		t.Fatal(err)
	}
	// Runtime state in the directory, as `overtime serve` keeps it.
	if err := svc.LoadState(ctx); err != nil {
		t.Fatal(err)
	}
	stateCtx, stopState := context.WithCancel(ctx)
	stateDone := make(chan struct{})
	go func() {
		defer close(stateDone)
		svc.SyncState(stateCtx, 5*time.Second)
	}()
	t.Cleanup(func() { stopState(); <-stateDone })
	now := opt.Now
	aopt := opt.API
	aopt.Now, aopt.Log = func() time.Time { return now }, log
	var cert tls.Certificate
	var caFile string
	var roots *x509.CertPool
	if opt.TLS {
		cert, caFile, roots, aopt.CAPin = siteCert(t, opt.TLSIPs...)
	}
	srv := api.New(svc, aopt)
	hs := httptest.NewUnstartedServer(srv)
	var serverTLS *tls.Config
	if opt.TLS {
		serverTLS = &tls.Config{Certificates: []tls.Certificate{cert}}
		hs.TLS = serverTLS.Clone()
		hs.StartTLS()
	} else {
		hs.Start()
	}
	t.Cleanup(hs.Close)
	e := &Env{Slapd: sl, Store: store, Svc: svc, API: srv, HTTP: hs, Now: now, ImagesDir: aopt.ImagesDir, CAFile: caFile, CAPin: aopt.CAPin, TLSConfig: serverTLS}
	e.Client = func(user, password string) *client.Client {
		c := &client.Client{BaseURL: hs.URL, User: user, Password: password}
		if roots != nil {
			c.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: time.Minute}
		}
		if opt.Wrap != nil {
			opt.Wrap(c)
		}
		return c
	}
	return e
}

// siteCert makes the test's site CA and the server's certificate for 127.0.0.1: the
// chain (server, then CA) with its key, the CA's certificate file, a pool holding the CA,
// and its pin. ips are addresses the certificate holds beside 127.0.0.1.
func siteCert(t testing.TB, ips ...net.IP) (tls.Certificate, string, *x509.CertPool, string) {
	t.Helper()
	dir := t.TempDir()
	ca := unidir.NewCA(t, dir, "site-ca")
	certFile, keyFile := ca.Issue(t, dir, "site-manager", ips...)
	leaf, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	chain := append(leaf, []byte(ca.PEM(t))...)
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(chain, key)
	if err != nil {
		t.Fatal(err)
	}
	pin, err := capin.FromChainPEM(chain)
	if err != nil || pin == "" {
		t.Fatalf("the test's chain pins no CA: %q %v", pin, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	return cert, ca.CertPEM, roots, pin
}

// Admin is a client logged in as the site admin.
func (e *Env) Admin() *client.Client { return e.Client("admin", AdminPassword) }

// ExampleSite reads docs/examples/site.yaml.
func ExampleSite(t testing.TB) *model.Site {
	t.Helper()
	f, err := os.Open(filepath.Join(RepoRoot(t), "docs", "examples", "site.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	site, err := sitefile.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return site
}

// ApplyExample loads the example site and creates the users its roles name
// (password "<uid>-secret").
func (e *Env) ApplyExample(t testing.TB) {
	t.Helper()
	var ch client.Changes
	if err := e.Admin().Send("PUT", "/api/v1/site", nil, ExampleSite(t), &ch); err != nil {
		t.Fatalf("apply example site: %v", err)
	}
	for _, u := range []string{"alice", "bob", "carol", "dave", "eve"} {
		if err := e.Admin().Send("POST", "/api/v1/users", nil, api.UserRequest{UID: u, Password: u + "-secret"}, nil); err != nil {
			t.Fatalf("add user %s: %v", u, err)
		}
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// ArtefactDir is a directory for what a test keeps after its run (screenshots of a booted
// desktop, for a person to look at): $OVERTIME_ARTEFACTS/NAME, or bin/artefacts/NAME in
// the checkout (which git ignores). Unlike t.TempDir, it survives the test.
func ArtefactDir(t testing.TB, name string) string {
	t.Helper()
	base := os.Getenv("OVERTIME_ARTEFACTS")
	if base == "" {
		base = filepath.Join(RepoRoot(t), "bin", "artefacts")
	}
	dir := filepath.Join(base, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
