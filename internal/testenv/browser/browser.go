// Package browser drives Debian's headless Chromium (/usr/bin/chromium) through the
// DevTools protocol (github.com/chromedp/chromedp) for tests of the web UI
// (sitemgmt/web): the pages as a user sees them, with the Content-Security-Policy,
// cookies, redirects and scripts a real browser applies.
//
// A test starts a browser against a running API server and clicks through it:
//
//	e := testenv.New(t, testenv.Options{})
//	b := browser.New(t, e.HTTP.URL)
//	b.Login("admin", testenv.AdminPassword)
//	b.Go("/ui/pools")
//	if got := b.Text("main h1"); got != "Pools" { ... }
//
// Every helper fails the test (t.Fatal) when its action fails or takes longer than
// Browser.ActionTimeout; selectors are CSS selectors for the first matching element,
// and the element query helpers wait until it is there (Click, SendKeys and
// WaitVisible until it is visible). The whole browser lives at most TestTimeout (or
// until shortly before the test binary's deadline).
//
// The browser watches the page: an uncaught JavaScript exception or a violation of
// the Content-Security-Policy fails the test (reported at the next helper call and at
// the test's end), other console errors and warnings are logged with t.Log, and a
// JavaScript dialog (alert, confirm, prompt) is dismissed and recorded (Dialogs): the
// UI uses none, so a test that cares asserts the list is empty.
//
// Screenshot writes full-page PNGs: into docs/screenshots/ when OVERTIME_SCREENSHOTS=1
// (to refresh the committed images the docs show), otherwise into the test's temporary
// directory, so `make test` leaves the tree clean.
package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// Chromium is Debian's chromium package's browser (scripts/deps.sh installs it).
const Chromium = "/usr/bin/chromium"

// Window size: a laptop screen.
const (
	Width  = 1366
	Height = 900
)

// ScreenshotsEnv, set to 1, makes Screenshot write into docs/screenshots/.
const ScreenshotsEnv = "OVERTIME_SCREENSHOTS"

// TestTimeout bounds a browser's whole life (the test's own deadline may end it sooner).
const TestTimeout = 3 * time.Minute

// Browser is one headless Chromium with one tab, logged in as nobody yet.
type Browser struct {
	t    testing.TB
	Base string // the server's base URL, e.g. http://127.0.0.1:41234
	// ActionTimeout bounds each helper call (default 20 s).
	ActionTimeout time.Duration

	ctx context.Context // the tab

	mu       sync.Mutex
	problems []string // exceptions and CSP violations not yet reported
	dialogs  []string
}

// New starts a headless Chromium for t against the server at baseURL; t's cleanup
// closes it. Under -short the test is skipped (needs.Servers); without -short a missing
// /usr/bin/chromium is a failure naming the package to install.
func New(t testing.TB, baseURL string) *Browser {
	t.Helper()
	needs.Servers(t, "chromium")
	if _, err := os.Stat(Chromium); err != nil {
		t.Fatalf("needs chromium: %v (install Debian's chromium package: scripts/deps.sh)", err)
	}
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium),
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.WindowSize(Width, Height),
		chromedp.UserDataDir(profile),
		// No crash reports, no component updates or field trials fetched from Google.
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("lang", "en-US"),
	)
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to run as root.
		opts = append(opts, chromedp.NoSandbox)
	}
	life, cancelLife := context.WithTimeout(context.Background(), lifetime(t))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(life, opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf), chromedp.WithErrorf(func(f string, a ...any) {
		// The protocol client's own errors (unknown events of a newer Chromium): log only.
		t.Logf("chromedp: "+f, a...)
	}))
	b := &Browser{t: t, Base: strings.TrimSuffix(baseURL, "/"), ActionTimeout: 20 * time.Second, ctx: ctx}
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits until the browser has exited and freed its profile
		cancelLife()
		b.report(t.Errorf)
	})
	start := time.Now()
	// The first Run starts the browser and opens the tab; it must use the tab's own
	// context (a shorter-lived one would end the browser with it).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", Chromium, err)
	}
	if err := chromedp.Listen(ctx, b.onEvent); err != nil {
		t.Fatalf("listening to the browser: %v", err)
	}
	// A script every document runs first (DevTools-injected scripts are exempt from the
	// CSP): it reports CSP violations, which Chromium otherwise reports only as a console
	// message whose wording changes between versions.
	b.run("watch CSP", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspWatcher})
		return err
	}))
	// The page's viewport is the laptop screen (the window-size flag sizes the window,
	// of which headless Chromium gives the page less).
	b.run("set the viewport", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: Width, Height: Height, DeviceScaleFactor: 1})
		return err
	}))
	t.Logf("browser: chromium started in %v", time.Since(start).Round(time.Millisecond))
	return b
}

// cspMarker starts the console message the watcher writes for a CSP violation.
const cspMarker = "overtime-csp-violation:"

const cspWatcher = `document.addEventListener("securitypolicyviolation", function (e) {
	console.error("` + cspMarker + ` " + e.violatedDirective + " blocked " + (e.blockedURI || "inline") +
		" at " + e.sourceFile + ":" + e.lineNumber + (e.sample ? " (" + e.sample + ")" : ""));
});`

// lifetime is TestTimeout, or less when the test binary's deadline comes sooner.
func lifetime(t testing.TB) time.Duration {
	d := TestTimeout
	if tt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := tt.Deadline(); ok {
			if left := time.Until(dl) - 10*time.Second; left < d {
				d = max(left, time.Second)
			}
		}
	}
	return d
}

// onEvent runs on the protocol client's event goroutine: it must not call the browser
// synchronously.
func (b *Browser) onEvent(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			msg = d.Exception.Description
		}
		b.problem(fmt.Sprintf("JavaScript exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
	case *runtime.EventConsoleAPICalled:
		var parts []string
		for _, a := range ev.Args {
			switch {
			case a.Value != nil:
				s := strings.TrimSpace(string(a.Value))
				parts = append(parts, strings.Trim(s, `"`))
			case a.Description != "":
				parts = append(parts, a.Description)
			}
		}
		text := strings.Join(parts, " ")
		switch {
		case strings.HasPrefix(text, cspMarker):
			b.problem("Content-Security-Policy violation:" + strings.TrimPrefix(text, cspMarker))
		case ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert:
			b.t.Logf("browser console %s: %s", ev.Type, text)
		}
	case *cdplog.EventEntryAdded:
		e := ev.Entry
		if e == nil || (e.Level != cdplog.EntryLevelError && e.Level != cdplog.EntryLevelWarning) {
			return
		}
		if strings.Contains(e.Text, "Content Security Policy") {
			b.problem(fmt.Sprintf("Content-Security-Policy violation (%s): %s", e.URL, e.Text))
			return
		}
		// e.g. "Failed to load resource: ... 403": expected where a test provokes one.
		b.t.Logf("browser log %s %s: %s %s", e.Source, e.Level, e.Text, e.URL)
	case *page.EventJavascriptDialogOpening:
		b.mu.Lock()
		b.dialogs = append(b.dialogs, fmt.Sprintf("%s: %s", ev.Type, ev.Message))
		b.mu.Unlock()
		b.t.Logf("browser: JavaScript %s dialog %q (dismissed)", ev.Type, ev.Message)
		// An open dialog blocks the page: dismiss it, from another goroutine.
		go func() {
			ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
			defer cancel()
			_ = chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
				return err
			}))
		}()
	}
}

func (b *Browser) problem(s string) {
	b.mu.Lock()
	b.problems = append(b.problems, s)
	b.mu.Unlock()
}

// report hands the problems not yet reported to fail (t.Errorf or t.Fatalf).
func (b *Browser) report(fail func(string, ...any)) {
	b.mu.Lock()
	ps := b.problems
	b.problems = nil
	b.mu.Unlock()
	if len(ps) > 0 {
		fail("browser: the page had %d error(s):\n  %s", len(ps), strings.Join(ps, "\n  "))
	}
}

// Problems returns and forgets the JavaScript exceptions and CSP violations seen since
// the last call (for a test that provokes one on purpose).
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ps := b.problems
	b.problems = nil
	return ps
}

// Dialogs are the JavaScript dialogs the page opened (all were dismissed): "alert: 1".
func (b *Browser) Dialogs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.dialogs...)
}

// Context is the tab's context, for chromedp actions the helpers lack:
// chromedp.Do(b.Context(), ...).
func (b *Browser) Context() context.Context { return b.ctx }

// run runs actions with the action timeout and fails the test on an error or on a
// page problem seen so far.
func (b *Browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.ActionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fatal(what, err)
	}
	b.report(b.t.Fatalf)
}

func (b *Browser) fatal(what string, err error) {
	b.t.Helper()
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w after %v (at %s)", err, b.ActionTimeout, b.location())
	}
	b.t.Fatalf("browser: %s: %v", what, err)
}

// location is the tab's URL, for error messages (best effort).
func (b *Browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return "?"
	}
	return loc
}

// navigate runs actions that load a page and waits for it; it returns the HTTP
// status of the document (after redirects).
func (b *Browser) navigate(what string, actions ...chromedp.Action[chromedp.Void]) int {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.ActionTimeout)
	defer cancel()
	res, err := chromedp.RunResponse(ctx, actions...)
	if err != nil {
		b.fatal(what, err)
	}
	b.report(b.t.Fatalf)
	if res == nil {
		return 0
	}
	return int(res.Status)
}

// URL is path on the server (an absolute URL stays as it is).
func (b *Browser) URL(path string) string {
	if strings.Contains(path, "://") {
		return path
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return b.Base + path
}

// Go loads path (e.g. "/ui/") and returns the HTTP status of the page it ended on.
func (b *Browser) Go(path string) int {
	b.t.Helper()
	return b.navigate("go to "+path, chromedp.Navigate(b.URL(path)))
}

// Location is the URL the tab shows.
func (b *Browser) Location() string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.ActionTimeout)
	defer cancel()
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		b.fatal("location", err)
	}
	return loc
}

// Path is the path (and query) of the tab's URL on the server.
func (b *Browser) Path() string {
	b.t.Helper()
	return strings.TrimPrefix(b.Location(), b.Base)
}

// TryLogin fills in and submits the login form and returns the HTTP status of the page
// it leads to (200 after the redirect to the overview; 401 for a wrong password).
func (b *Browser) TryLogin(uid, password string) int {
	b.t.Helper()
	b.Go("/ui/login")
	b.SetValue("#uid", uid)
	b.SetValue("#password", password)
	return b.Submit(`main form[action$="/login"] button[type=submit]`)
}

// Login logs in as uid and fails the test unless the page then offers to log out.
func (b *Browser) Login(uid, password string) {
	b.t.Helper()
	if code := b.TryLogin(uid, password); code != 200 || !b.Exists("form.who button[type=submit]") {
		b.t.Fatalf("browser: login as %s: status %d at %s: %s", uid, code, b.Path(), b.Text("main"))
	}
}

// Logout presses the header's "Log out" button; it returns the status of the page
// that follows (the login page: 200; the error page: 403 without a CSRF token).
func (b *Browser) Logout() int {
	b.t.Helper()
	return b.Submit("form.who button[type=submit]")
}

// Click clicks the first visible element matching sel (a page change it causes is not
// waited for: use Submit for that).
func (b *Browser) Click(sel string) {
	b.t.Helper()
	b.run("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// Submit clicks sel (a submit button or a link) and waits for the page it loads; it
// returns that page's HTTP status.
func (b *Browser) Submit(sel string) int {
	b.t.Helper()
	return b.navigate("click "+sel+" and wait for the next page", chromedp.Click(chromedp.CSS(sel)))
}

// SetValue sets the value of the input, select or textarea sel (as a script would:
// no key events).
func (b *Browser) SetValue(sel, value string) {
	b.t.Helper()
	b.run("set "+sel, chromedp.SetValue(chromedp.CSS(sel), value))
}

// SendKeys focuses sel and types keys into it (key events, as a user types; special
// keys from chromedp/kb, e.g. kb.Enter).
func (b *Browser) SendKeys(sel, keys string) {
	b.t.Helper()
	b.run("type into "+sel, chromedp.SendKeys(chromedp.CSS(sel), keys))
}

// Key types keys into the focused element (kb.Escape, kb.ArrowDown, "a", ...).
func (b *Browser) Key(keys string) {
	b.t.Helper()
	b.run("key "+fmt.Sprintf("%q", keys), chromedp.KeyEvent(keys))
}

// WaitVisible waits until sel is on the page and visible.
func (b *Browser) WaitVisible(sel string) {
	b.t.Helper()
	b.run("wait for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// WaitGone waits until no element matches sel.
func (b *Browser) WaitGone(sel string) {
	b.t.Helper()
	b.run("wait for "+sel+" to go", chromedp.WaitNotPresent(chromedp.CSS(sel)))
}

// Text is the visible text (innerText) of sel, waiting until it is there.
func (b *Browser) Text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.fatal("text of "+sel, err)
	}
	return s
}

// Texts are the visible texts of every element matching sel now (none: empty).
func (b *Browser) Texts(sel string) []string {
	b.t.Helper()
	var out []string
	b.Eval(`Array.from(document.querySelectorAll(`+jsString(sel)+`), e => e.innerText)`, &out)
	return out
}

// Exists reports whether an element matches sel now (no waiting).
func (b *Browser) Exists(sel string) bool {
	b.t.Helper()
	var ok bool
	b.Eval(`document.querySelector(`+jsString(sel)+`) !== null`, &ok)
	return ok
}

// Count is the number of elements matching sel now.
func (b *Browser) Count(sel string) int {
	b.t.Helper()
	var n int
	b.Eval(`document.querySelectorAll(`+jsString(sel)+`).length`, &n)
	return n
}

// Value is the current value of the input, select or textarea sel.
func (b *Browser) Value(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.ActionTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(sel)))
	if err != nil {
		b.fatal("value of "+sel, err)
	}
	return s
}

// Eval evaluates a JavaScript expression in the page (as DevTools does: the CSP does
// not apply) and stores its JSON value in out (nil: discard). A page script's
// globals are visible to it.
func (b *Browser) Eval(js string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.ActionTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[*runtime.RemoteObject](js, chromedp.EvalAsValue))
	if err != nil {
		b.fatal("evaluate "+js, err)
	}
	if out == nil || v == nil || v.Type == runtime.RemoteObjectTypeUndefined {
		if out != nil {
			b.t.Fatalf("browser: evaluate %s: undefined", js)
		}
		return
	}
	if err := json.Unmarshal([]byte(v.Value), out); err != nil {
		b.t.Fatalf("browser: evaluate %s: %v (value %s)", js, err, v.Value)
	}
}

// TypeOf is JavaScript's typeof of expr ("undefined" for an unset global).
func (b *Browser) TypeOf(expr string) string {
	b.t.Helper()
	var s string
	b.Eval(`typeof (`+expr+`)`, &s)
	return s
}

// HTML is the current document's markup (as the DOM has it now).
func (b *Browser) HTML() string {
	b.t.Helper()
	var s string
	b.Eval(`document.documentElement.outerHTML`, &s)
	return s
}

// Screenshot saves a full-page PNG of the tab as NAME.png and returns its path:
// in docs/screenshots/ with OVERTIME_SCREENSHOTS=1, else in a temporary directory.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.ActionTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.fatal("screenshot "+name, err)
	}
	dir := b.t.TempDir()
	if os.Getenv(ScreenshotsEnv) == "1" {
		dir = filepath.Join(testenv.RepoRoot(b.t), "docs", "screenshots")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("browser: screenshot %s", path)
	return path
}

// Drag presses the left mouse button at the centre of fromSel, moves the mouse in
// steps to the centre of toSel and releases it there: real mouse events, as the
// schedule grid's drag selection needs. fromSel is scrolled into view; toSel must then
// be in the viewport too.
func (b *Browser) Drag(fromSel, toSel string) {
	b.t.Helper()
	var pts struct {
		From, To []float64
		Err      string
	}
	b.Eval(`(() => {
		const a = document.querySelector(`+jsString(fromSel)+`), z = document.querySelector(`+jsString(toSel)+`);
		if (!a || !z) return {Err: (a ? `+jsString(toSel)+` : `+jsString(fromSel)+`) + " not found"};
		a.scrollIntoView({block: "center", inline: "center"});
		const c = e => { const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; };
		const to = c(z);
		if (to[0] < 0 || to[1] < 0 || to[0] > innerWidth || to[1] > innerHeight) return {Err: `+jsString(toSel)+` + " is outside the viewport"};
		return {From: c(a), To: to};
	})()`, &pts)
	if pts.Err != "" {
		b.t.Fatalf("browser: drag %s to %s: %s", fromSel, toSel, pts.Err)
	}
	x0, y0, x1, y1 := pts.From[0], pts.From[1], pts.To[0], pts.To[1]
	steps := []chromedp.Action[chromedp.Void]{
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x0, y0),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x0, y0, chromedp.ButtonLeft, buttons(1), clicks(1)),
	}
	const n = 8
	for i := 1; i <= n; i++ {
		f := float64(i) / n
		steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x0+(x1-x0)*f, y0+(y1-y0)*f, chromedp.ButtonLeft, buttons(1)))
	}
	steps = append(steps, chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x1, y1, chromedp.ButtonLeft, clicks(1)))
	b.run("drag "+fromSel+" to "+toSel, steps...)
}

func buttons(n int64) chromedp.MouseOption {
	return func(p *input.DispatchMouseEventParams) { p.Buttons = n }
}

func clicks(n int64) chromedp.MouseOption {
	return func(p *input.DispatchMouseEventParams) { p.ClickCount = n }
}

// Cookies are the browser's cookies for the server (name -> value).
func (b *Browser) Cookies() map[string]string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, b.ActionTimeout)
	defer cancel()
	out := map[string]string{}
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		res, err := cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{b.Base}})
		if err != nil {
			return err
		}
		for _, c := range res.Cookies {
			out[c.Name] = c.Value
		}
		return nil
	}))
	if err != nil {
		b.fatal("cookies", err)
	}
	return out
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`, "\u2028", `\u2028`, "\u2029", `\u2029`, "</", `<\/`)
	return `"` + r.Replace(s) + `"`
}
