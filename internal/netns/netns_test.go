package netns

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// A server listening inside the namespace on the bridge address answers a client that
// dials from inside, and the address does not exist in the caller's own namespace.
func TestListenDialInside(t *testing.T) {
	needs.Servers(t, "root (network namespaces)")
	n, err := New("ot-test")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	if err := n.AddBridge("br0", "10.77.0.1/24"); err != nil {
		t.Fatal(err)
	}
	l, err := n.Listen("tcp", "10.77.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inside") })}
	go srv.Serve(l)
	defer srv.Close()
	resp, err := n.HTTPClient().Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "inside" {
		t.Fatalf("got %q", b)
	}
	if _, err := http.Get("http://" + l.Addr().String() + "/"); err == nil {
		t.Fatal("the namespace's address answered from the host namespace")
	}
	out, err := n.Command("ip", "-o", "addr", "show", "br0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "10.77.0.1/24") {
		t.Fatalf("ip netns exec: %v %s", err, out)
	}
}
