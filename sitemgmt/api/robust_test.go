package api

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	_ "time/tzdata" // the zone database, so that zone tests do not depend on the machine

	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Request bodies: a JSON body must be an object (null decoded to nothing and wiped the
// entity a PUT replaced), and a body over the limit is 413, refused before reading when
// its length is declared.
func TestDecodeJSONBodies(t *testing.T) {
	type body struct {
		Name string `json:"name"`
	}
	big := strings.Repeat(" ", maxBody+1)
	for _, tc := range []struct {
		name    string
		body    io.Reader
		length  int64 // -1: unknown (chunked)
		want    string
		invalid bool // model.InvalidError (400)
		large   bool // tooLarge (413)
	}{
		{"object", strings.NewReader(`{"name":"a"}`), 12, "a", false, false},
		{"object after white space", strings.NewReader(" \n{\"name\":\"a\"}"), 14, "a", false, false},
		{"null", strings.NewReader(`null`), 4, "", true, false},
		{"null after white space", strings.NewReader(" \r\n\tnull"), 8, "", true, false},
		{"array", strings.NewReader(`[]`), 2, "", true, false},
		{"string", strings.NewReader(`"a"`), 3, "", true, false},
		{"number", strings.NewReader(`1`), 1, "", true, false},
		{"empty", strings.NewReader(``), 0, "", true, false},
		{"trailing data", strings.NewReader(`{} {}`), 5, "", true, false},
		{"declared too large, never read", failingReader{t}, maxBody + 1, "", false, true},
		{"chunked too large", strings.NewReader(big), -1, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("PUT", "/api/v1/hosts/a", tc.body)
			r.ContentLength = tc.length
			var v body
			err := decodeJSON(r, &v)
			var inv *model.InvalidError
			if errors.As(err, &inv) != tc.invalid || errors.As(err, new(errstatus.TooLarge)) != tc.large || v.Name != tc.want {
				t.Fatalf("decodeJSON = %v, %+v; want invalid %v, too large %v, name %q", err, v, tc.invalid, tc.large, tc.want)
			}
		})
	}
}

// failingReader fails the test when read: the body must be refused unread.
type failingReader struct{ t *testing.T }

func (f failingReader) Read([]byte) (int, error) {
	f.t.Error("body read")
	return 0, io.EOF
}

// One user's bodies in flight are bounded; others are not affected, and a released
// body frees its share.
func TestBodyBudget(t *testing.T) {
	var b bodyBudget
	b.init(100)
	req := func(n int64) *http.Request {
		r := httptest.NewRequest("PUT", "/", nil)
		r.ContentLength = n
		return r
	}
	relA, err := b.admit("alice", req(60))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.admit("alice", req(41)); err == nil {
		t.Fatal("over budget admitted")
	}
	relB, err := b.admit("bob", req(100))
	if err != nil {
		t.Fatalf("another user refused: %v", err)
	}
	if rel, err := b.admit("alice", req(0)); err != nil {
		t.Fatalf("no body refused: %v", err)
	} else {
		rel()
	}
	if _, err := b.admit("alice", req(maxBody+1)); !errors.As(err, new(errstatus.TooLarge)) {
		t.Fatalf("declared over maxBody: %v", err)
	}
	relA()
	relB()
	rel, err := b.admit("alice", req(100))
	if err != nil {
		t.Fatalf("budget not released: %v", err)
	}
	rel()
	if len(b.inFlight) != 0 {
		t.Fatalf("left over: %v", b.inFlight)
	}
	// A body of unknown length reserves the most a handler reads.
	b.init(maxBody)
	if _, err := b.admit("carol", req(-1)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.admit("carol", req(1)); err == nil {
		t.Fatal("chunked body reserved less than maxBody")
	}
}

func TestParseTimeDaylightSaving(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err) // time/tzdata is linked in: this cannot depend on the machine
	}
	for _, tc := range []struct {
		in, want, err string
	}{
		{"2026-03-29 01:59", "2026-03-29T00:59:00Z", ""},
		{"2026-03-29 02:30", "", "does not exist in time zone Europe/Berlin"}, // clocks skip 02:00-03:00
		{"2026-03-29T02:00:00", "", "does not exist"},
		{"2026-03-29 03:00", "2026-03-29T01:00:00Z", ""},
		{"2026-10-25 02:30", "2026-10-25T00:30:00Z", ""},          // passed twice: the first, summer time
		{"2026-10-25T02:30:00+01:00", "2026-10-25T01:30:00Z", ""}, // the second, by its offset
		{"2026-10-25 03:00", "2026-10-25T02:00:00Z", ""},
		{"2026-12-01 10:00", "2026-12-01T09:00:00Z", ""},
		{"2026-12-01 25:00", "", "invalid time"},
	} {
		got, err := ParseTime(tc.in, berlin)
		if tc.err != "" {
			var inv *model.InvalidError
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &inv) {
				t.Errorf("ParseTime(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got.UTC().Format(time.RFC3339) != tc.want {
			t.Errorf("ParseTime(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// A FIFO, socket or device in a boot file directory is not a boot file: opening a FIFO
// would block the handler until a writer came, so it must be refused before opening.
func TestServeOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vmlinuz"), []byte("KERNEL"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("fifo", filepath.Join(dir, "link-to-fifo")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{opt: Options{Log: slog.New(slog.DiscardHandler)}}
	serve := s.serveFrom(dir, "path")
	for _, tc := range []struct {
		path string
		code int
	}{
		{"vmlinuz", 200},
		{"fifo", 404},
		{"link-to-fifo", 404},
		{"sub", 404},
	} {
		t.Run(tc.path, func(t *testing.T) {
			done := make(chan *httptest.ResponseRecorder)
			go func() {
				r := httptest.NewRequest("GET", "/images/"+tc.path, nil)
				r.SetPathValue("path", tc.path)
				w := httptest.NewRecorder()
				serve(w, r)
				done <- w
			}()
			select {
			case w := <-done:
				if w.Code != tc.code {
					t.Fatalf("GET %s = %d %q, want %d", tc.path, w.Code, w.Body, tc.code)
				}
			case <-time.After(10 * time.Second):
				// Unblock the handler so that the test binary can end.
				if f, err := os.OpenFile(filepath.Join(dir, "fifo"), os.O_WRONLY, 0); err == nil {
					f.Close()
				}
				t.Fatalf("GET %s hangs", tc.path)
			}
		})
	}
}

// A handler that panics answers 500 and is logged; the server goes on serving.
func TestPanicRecovered(t *testing.T) {
	var log bytes.Buffer
	s := &Server{opt: Options{Log: slog.New(slog.NewTextHandler(&log, nil))}, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/boom", nil))
	if w.Code != http.StatusInternalServerError || !strings.Contains(log.String(), "panic in handler") || !strings.Contains(log.String(), "boom") {
		t.Fatalf("status %d, log %q", w.Code, log.String())
	}
}
