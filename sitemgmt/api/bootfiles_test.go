package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
)

// TestBootFilesListener: the plain-HTTP listener beside an HTTPS API serves what firmware and the
// initramfs fetch, and refuses everything else — the API with or without credentials,
// the web UI, metrics, any write — pointing at the HTTPS address.
func TestBootFilesListener(t *testing.T) {
	env := testenv.New(t, testenv.Options{TLS: true})
	env.ApplyExample(t)
	plain := httptest.NewServer(api.BootFiles(env.API, "https://overtime.example.org:8443"))
	t.Cleanup(plain.Close)
	get := func(method, path string, basic bool) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, plain.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if basic {
			req.SetBasicAuth("admin", testenv.AdminPassword)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/boot/ipxe/52:54:00:00:00:01", "/boot/ipxe", "/healthz"} {
		if code, body := get(http.MethodGet, path, false); code != http.StatusOK {
			t.Errorf("GET %s: %d %s, want the boot answer", path, code, body)
		}
	}
	for _, c := range []struct {
		method, path string
		basic        bool
	}{
		{http.MethodGet, "/api/v1/site", true},
		{http.MethodGet, "/api/v1/agent/config", false},
		{http.MethodPost, "/api/v1/agent/heartbeat", false},
		{http.MethodGet, "/api/v1/agent/guest-secrets", false},
		{http.MethodGet, "/ui/", false},
		{http.MethodGet, "/metrics", false},
		{http.MethodPost, "/boot/ipxe/52:54:00:00:00:01", false},
		{http.MethodGet, "/bootx", false},
	} {
		code, body := get(c.method, c.path, c.basic)
		if code != http.StatusForbidden || !strings.Contains(body, "boot files only") || !strings.Contains(body, "https://overtime.example.org:8443") {
			t.Errorf("%s %s on the boot listener: %d %s, want 403 pointing at the HTTPS API", c.method, c.path, code, body)
		}
	}
}
