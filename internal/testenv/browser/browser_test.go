package browser

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// A small site with the UI's CSP: the helpers against pages whose behaviour is known.
func testServer(t *testing.T) *httptest.Server {
	pages := map[string]string{
		"/form":   `<form method="post" action="/posted"><input id="name" name="name"><button type="submit">Send</button></form>`,
		"/inline": `<p>inline</p><script>window.ran = 1</script>`,
		"/throws": `<p>throws</p><script src="/throws.js"></script>`,
		"/alert":  `<p>alert</p><script src="/alert.js"></script>`,
		"/drag": `<div id="a" style="position:absolute;left:100px;top:100px;width:50px;height:50px">a</div>` +
			`<div id="z" style="position:absolute;left:400px;top:300px;width:50px;height:50px">z</div>` +
			`<p id="out"></p><script src="/drag.js"></script>`,
	}
	scripts := map[string]string{
		"/throws.js": `throw new Error("boom")`,
		"/alert.js":  `alert("hi")`,
		"/drag.js": `let log = [];
document.addEventListener("mousedown", e => log.push("down " + e.target.id));
document.addEventListener("mousemove", e => { if (e.buttons === 1 && log[log.length-1] !== "move") log.push("move"); });
document.addEventListener("mouseup", e => { log.push("up " + e.target.id); document.getElementById("out").textContent = log.join(","); });`,
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'")
		if r.URL.Path == "/posted" {
			_ = r.ParseForm()
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusTeapot)
			_, _ = w.Write([]byte(`<p id="got">` + strings.ReplaceAll(r.PostForm.Get("name"), "<", "&lt;") + `</p>`))
			return
		}
		if js, ok := scripts[r.URL.Path]; ok {
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write([]byte(js))
			return
		}
		p, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!doctype html><html><head><title>t</title></head><body>" + p + "</body></html>"))
	}))
	t.Cleanup(s.Close)
	return s
}

func TestBrowser(t *testing.T) {
	s := testServer(t)
	b := New(t, s.URL)

	if code := b.Go("/missing"); code != http.StatusNotFound {
		t.Errorf("Go /missing: %d", code)
	}
	b.Go("/form")
	b.SendKeys("#name", "Ada <b>")
	if code := b.Submit("button[type=submit]"); code != http.StatusTeapot {
		t.Errorf("Submit: %d", code)
	}
	if got := b.Text("#got"); got != "Ada <b>" {
		t.Errorf("posted text %q", got)
	}
	if b.Path() != "/posted" || !b.Exists("#got") || b.Exists("#name") || b.Count("p") != 1 {
		t.Errorf("after the post: at %s, html %s", b.Path(), b.HTML())
	}

	// The page's problems would fail the next helper call: load the pages directly and
	// take the problems before.
	for _, p := range []string{"/throws", "/inline"} {
		if _, err := chromedp.RunResponse(b.Context(), chromedp.Navigate(b.URL(p))); err != nil {
			t.Fatal(err)
		}
	}
	// The events come after the load: collect them until both are in (Problems takes them).
	var ps string
	poll.Wait(10*time.Second, func() bool {
		if more := b.Problems(); len(more) > 0 {
			ps = strings.TrimPrefix(ps+"\n"+strings.Join(more, "\n"), "\n")
		}
		return strings.Contains(ps, "Content-Security-Policy violation") && strings.Contains(ps, "boom")
	})
	if !strings.Contains(ps, "Content-Security-Policy violation") || !strings.Contains(ps, "boom") {
		t.Errorf("problems:\n%s\nwant a CSP violation and the exception", ps)
	}
	if got := b.TypeOf("window.ran"); got != "undefined" {
		t.Errorf("the inline script ran despite the CSP: typeof window.ran = %s", got)
	}

	b.Go("/alert")
	b.WaitVisible("p")
	if d := b.Dialogs(); len(d) != 1 || d[0] != "alert: hi" {
		t.Errorf("dialogs %q", d)
	}
	b.Go("/drag")
	b.Drag("#a", "#z")
	if got := b.Text("#out"); got != "down a,move,up z" {
		t.Errorf("drag: %q", got)
	}
	b.Screenshot("drag")
}
