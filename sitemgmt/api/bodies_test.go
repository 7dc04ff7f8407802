package api_test

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
)

// rawRequest sends a request whose headers declare a body of length bytes but sends only
// its first bytes, and returns the answer's status. An answer needs the server to decide
// without reading the body: one that waited for the rest would hit the deadline.
func rawRequest(t *testing.T, base, method, path, user, pw string, length int64, first string) int {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Basic %s\r\nContent-Type: text/csv\r\nContent-Length: %d\r\n\r\n%s",
		method, path, u.Host, auth, length, first)
	// A failure bound, not a synchronisation: the answer comes as soon as the server
	// decided, which takes milliseconds.
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s as %s: no answer without the body: %v", method, path, user, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Request bodies are admitted before they are read: who may not write is refused, a body
// over the limit is 413, and a JSON body that is not an object changes nothing.
func TestRequestBodies(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.ApplyExample(t)
	base := env.HTTP.URL
	const huge = 1 << 30
	csvStart := "name,mac,ip,pool\npc-a01,52:54:00:0a:00:01,,lab-a\n"

	t.Run("refused unread", func(t *testing.T) {
		for _, tc := range []struct {
			name, method, path, user string
			want                     int
		}{
			{"viewer puts the site", "PUT", "/api/v1/site", "dave", 403},
			{"viewer puts a host", "PUT", "/api/v1/hosts/pc-a01", "dave", 403},
			{"viewer imports hosts", "POST", "/api/v1/hosts/import", "dave", 403},
			{"user without a role imports hosts", "POST", "/api/v1/hosts/import", "eve", 403},
			{"lecturer imports hosts", "POST", "/api/v1/hosts/import", "carol", 403},
			{"admin's site too large", "PUT", "/api/v1/site", "admin", 413},
			{"admin's import too large", "POST", "/api/v1/hosts/import", "admin", 413},
			{"pool admin's host too large", "PUT", "/api/v1/hosts/pc-a01", "alice", 413},
		} {
			t.Run(tc.name, func(t *testing.T) {
				pw := tc.user + "-secret"
				if tc.user == "admin" {
					pw = testenv.AdminPassword
				}
				if got := rawRequest(t, base, tc.method, tc.path, tc.user, pw, huge, csvStart); got != tc.want {
					t.Fatalf("status %d, want %d", got, tc.want)
				}
			})
		}
	})

	t.Run("chunked body over the limit", func(t *testing.T) {
		body := strings.NewReader("name,mac,ip,pool\n" + strings.Repeat("#", 33<<20))
		req, err := http.NewRequest("POST", base+"/api/v1/hosts/import", struct{ *strings.Reader }{body}) // hides the length
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("admin", testenv.AdminPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d, want 413", resp.StatusCode)
		}
	})

	t.Run("malformed CSV from a viewer", func(t *testing.T) {
		err := env.Client("dave", "dave-secret").SendRaw("POST", "/api/v1/hosts/import", nil, "text/csv", strings.NewReader("\"a,\"b\n\r\"\n"), nil)
		if status(err) != 403 {
			t.Fatalf("status %d (%v), want 403", status(err), err)
		}
	})

	t.Run("non-object bodies change nothing", func(t *testing.T) {
		admin := env.Admin()
		before := mustSite(t, env)
		for _, path := range []string{"/api/v1/hosts/pc-a01", "/api/v1/pools/lab-a", "/api/v1/site", "/api/v1/site/settings"} {
			for _, body := range []string{"null", " null\n", "[]", `"x"`, "0"} {
				err := admin.Send("PUT", path, nil, json.RawMessage(body), nil)
				if status(err) != 400 || !strings.Contains(err.Error(), "expected a JSON object") {
					t.Errorf("PUT %s %q: %v, want 400", path, body, err)
				}
			}
		}
		if after := mustSite(t, env); !reflect.DeepEqual(before, after) {
			t.Fatal("a refused body changed the site")
		}
	})

}
