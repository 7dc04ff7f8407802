package web_test

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// poolFieldBlock is the form paragraph holding the input with id (up to its </p>): where the
// field's own error is shown.
func poolFieldBlock(t *testing.T, body, id string) string {
	t.Helper()
	i := strings.Index(body, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no field %s on the page", id)
	}
	j := strings.Index(body[i:], "</p>")
	if j < 0 {
		t.Fatalf("field %s: no end of its paragraph", id)
	}
	return body[i : i+j]
}

// postCSVFile sends a form with a file as the import page's upload does.
func (b *browser) postCSVFile(path string, fields map[string]string, fileName, file string) (int, string) {
	b.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		_ = mw.WriteField(k, v)
	}
	fw, _ := mw.CreateFormFile("file", fileName)
	_, _ = io.WriteString(fw, file)
	_ = mw.Close()
	return b.postBody(path, mw.FormDataContentType(), &buf)
}

// siteHost is a copy of the site's host (nil: none).
func siteHost(e *testenv.Env, name string) *model.Host {
	h := e.Svc.Snapshot().Site.Host(name)
	if h == nil {
		return nil
	}
	c := *h
	return &c
}

// TestPoolAndHostPages: the pool list and page, adding, editing and removing hosts with
// errors shown at their fields and nothing half-saved, and escaping of hostile strings.
func TestPoolAndHostPages(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	admin := newBrowser(t, e)
	admin.login("admin", testenv.AdminPassword)

	code, body := admin.get("/ui/pools")
	if code != http.StatusOK || !strings.Contains(body, `href="/ui/pools/lab-a"`) || !strings.Contains(body, `href="/ui/pools/lab-b"`) {
		t.Fatalf("pools: %d\n%s", code, body)
	}
	code, body = admin.get("/ui/pools/lab-a")
	if code != http.StatusOK {
		t.Fatalf("pool page: %d\n%s", code, body)
	}
	for _, want := range []string{">pc-a01<", ">pc-a05<", "52:54:00:0a:00:03", "10.20.0.14", "Building 101, room 0.12", "Teaching pool", "Add a host", `value="wake"`} {
		if !strings.Contains(body, want) {
			t.Errorf("pool page lacks %q", want)
		}
	}
	if strings.Contains(body, ">pc-b01<") {
		t.Errorf("lab-a's page lists lab-b's host")
	}
	if code, _ := admin.get("/ui/pools/no-such-pool"); code != http.StatusNotFound {
		t.Errorf("unknown pool: %d, want 404", code)
	}
	tok := admin.csrf("/ui/pools/lab-a")

	t.Run("invalid MAC", func(t *testing.T) {
		code, body := admin.post("/ui/pools/lab-a/hosts", url.Values{"csrf": {tok}, "name": {"pc-a06"}, "mac": {"52:54:zz"}, "ip": {"10.20.0.16"}})
		if code != http.StatusBadRequest {
			t.Fatalf("invalid MAC: %d", code)
		}
		if blk := poolFieldBlock(t, body, "add-mac"); !strings.Contains(blk, "fielderr") || !strings.Contains(blk, "invalid MAC address") {
			t.Errorf("the MAC's error is not at the MAC field: %s", blk)
		}
		if strings.Contains(poolFieldBlock(t, body, "add-name"), "fielderr") || strings.Contains(poolFieldBlock(t, body, "add-ip"), "fielderr") {
			t.Errorf("an error is shown at a valid field")
		}
		if !strings.Contains(body, `value="pc-a06"`) || !strings.Contains(body, `value="10.20.0.16"`) {
			t.Errorf("the form lost the user's input")
		}
		if siteHost(e, "pc-a06") != nil {
			t.Fatal("a host with an invalid MAC was written")
		}
	})
	t.Run("MAC of another host", func(t *testing.T) {
		code, body := admin.post("/ui/pools/lab-a/hosts", url.Values{"csrf": {tok}, "name": {"pc-a06"}, "mac": {"52:54:00:0A:00:01"}})
		if code != http.StatusBadRequest || !strings.Contains(poolFieldBlock(t, body, "add-mac"), "belongs to host pc-a01") {
			t.Errorf("duplicate MAC: %d", code)
		}
		if siteHost(e, "pc-a06") != nil {
			t.Fatal("a host with a duplicate MAC was written")
		}
	})
	t.Run("model error at its field", func(t *testing.T) {
		// Passes the form's own checks; the model refuses the duplicate IP.
		code, body := admin.post("/ui/pools/lab-a/hosts", url.Values{"csrf": {tok}, "name": {"pc-a06"}, "mac": {"52:54:00:0a:00:06"}, "ip": {"10.20.0.11"}})
		if code != http.StatusConflict || !strings.Contains(poolFieldBlock(t, body, "add-ip"), "duplicate IP 10.20.0.11") {
			t.Errorf("duplicate IP: %d\n%s", code, poolFieldBlock(t, body, "add-ip"))
		}
		if siteHost(e, "pc-a06") != nil {
			t.Fatal("a host with a duplicate IP was written")
		}
	})
	t.Run("hostile name", func(t *testing.T) {
		evil := `<img src=x onerror=alert(1)>`
		code, body := admin.post("/ui/pools/lab-a/hosts", url.Values{"csrf": {tok}, "name": {evil}, "mac": {"52:54:00:0a:00:06"}})
		if code != http.StatusBadRequest || !strings.Contains(poolFieldBlock(t, body, "add-name"), "invalid hostname") {
			t.Fatalf("hostile name: %d", code)
		}
		if strings.Contains(body, "<img") || !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("the hostile name is not escaped")
		}
	})
	t.Run("add", func(t *testing.T) {
		code, body := admin.post("/ui/pools/lab-a/hosts", url.Values{"csrf": {tok}, "name": {"pc-a06"}, "mac": {"52-54-00-0A-00-06"}, "ip": {"10.20.0.16"}})
		if code != http.StatusOK || !strings.Contains(body, "host pc-a06 added") || !strings.Contains(body, ">pc-a06<") {
			t.Fatalf("add: %d\n%s", code, body)
		}
		h := siteHost(e, "pc-a06")
		if h == nil || h.MAC != "52:54:00:0a:00:06" || h.IP != "10.20.0.16" || h.Pool != "lab-a" {
			t.Fatalf("added host: %+v", h)
		}
	})
	t.Run("host page and edit", func(t *testing.T) {
		code, body := admin.get("/ui/hosts/pc-a05")
		if code != http.StatusOK {
			t.Fatalf("host page: %d", code)
		}
		for _, want := range []string{"Host pc-a05", "52:54:00:0a:00:05", "daily 00:00-24:00 desktop", "Mode now", "no agent", `id="ed-mac"`, "Remove host pc-a05"} {
			if !strings.Contains(body, want) {
				t.Errorf("host page lacks %q", want)
			}
		}
		code, body = admin.post("/ui/hosts/pc-a05", url.Values{"csrf": {tok}, "mac": {"52:54:00:0a:00:05"}, "ip": {"10.20.0.300"}, "pool": {"lab-a"}})
		if code != http.StatusBadRequest || !strings.Contains(poolFieldBlock(t, body, "ed-ip"), "invalid IPv4 address") || !strings.Contains(body, `value="10.20.0.300"`) {
			t.Errorf("invalid IP: %d", code)
		}
		code, body = admin.post("/ui/hosts/pc-a05", url.Values{"csrf": {tok}, "mac": {"52:54:00:0a:00:55"}, "ip": {"10.20.0.12"}, "pool": {"lab-a"}})
		if code != http.StatusConflict || !strings.Contains(poolFieldBlock(t, body, "ed-ip"), "duplicate IP") {
			t.Errorf("duplicate IP: %d", code)
		}
		if h := siteHost(e, "pc-a05"); h.MAC != "52:54:00:0a:00:05" || h.IP != "10.20.0.15" {
			t.Fatalf("a refused edit changed the host (half-saved): %+v", h)
		}
		code, body = admin.post("/ui/hosts/pc-a05", url.Values{"csrf": {tok}, "mac": {"52:54:00:0a:00:55"}, "ip": {"10.20.0.55"}, "pool": {"lab-a"}})
		if code != http.StatusOK || !strings.Contains(body, "host pc-a05 saved") {
			t.Fatalf("edit: %d", code)
		}
		if h := siteHost(e, "pc-a05"); h.MAC != "52:54:00:0a:00:55" || h.IP != "10.20.0.55" || len(h.Weekly) != 1 {
			t.Fatalf("edited host: %+v", h)
		}
	})
	t.Run("remove", func(t *testing.T) {
		code, body := admin.post("/ui/hosts/pc-a06/delete", url.Values{"csrf": {tok}, "confirm": {"pc-a6"}})
		if code != http.StatusBadRequest || !strings.Contains(poolFieldBlock(t, body, "rm-confirm"), "to confirm") || siteHost(e, "pc-a06") == nil {
			t.Fatalf("remove without confirmation: %d", code)
		}
		code, body = admin.post("/ui/hosts/pc-a06/delete", url.Values{"csrf": {tok}, "confirm": {"pc-a06"}})
		if code != http.StatusOK || !strings.Contains(body, "host pc-a06 removed") || siteHost(e, "pc-a06") != nil {
			t.Fatalf("remove: %d", code)
		}
	})
	t.Run("hostile description escaped", func(t *testing.T) {
		var pool model.Pool
		if _, err := e.Admin().Get("/api/v1/pools/lab-a", nil, &pool); err != nil {
			t.Fatal(err)
		}
		pool.Description = "<script>alert(1)</script>"
		pool.Room = "<b>room</b>"
		if err := e.Admin().Send("PUT", "/api/v1/pools/lab-a", nil, pool, nil); err != nil {
			t.Fatal(err)
		}
		for _, page := range []string{"/ui/pools", "/ui/pools/lab-a"} {
			_, body := admin.get(page)
			if strings.Contains(body, "<script>alert") || strings.Contains(body, "<b>room") {
				t.Errorf("%s: hostile description not escaped", page)
			}
			if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
				t.Errorf("%s: the description is not shown escaped", page)
			}
		}
	})
}

// TestPoolAdminConfined: a pool admin of lab-a neither sees lab-b's pages nor changes its
// hosts with their valid session and token; controls are shown only to admins.
func TestPoolAdminConfined(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	alice := newBrowser(t, e)
	alice.login("alice", "alice-secret")
	tok := alice.csrf("/ui/pools/lab-a")

	code, body := alice.get("/ui/pools")
	if code != http.StatusOK || !strings.Contains(body, "/ui/pools/lab-a") || strings.Contains(body, "/ui/pools/lab-b") {
		t.Errorf("alice's pool list: %d", code)
	}
	for _, page := range []string{"/ui/pools/lab-b", "/ui/hosts/pc-b01", "/ui/pools/lab-b/import"} {
		if code, _ := alice.get(page); code != http.StatusForbidden {
			t.Errorf("GET %s: %d, want 403", page, code)
		}
	}
	before := e.Svc.Snapshot().Site
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{"/ui/pools/lab-b/hosts", url.Values{"name": {"pc-b09"}, "mac": {"52:54:00:0b:00:09"}, "ip": {"10.20.0.29"}}},
		{"/ui/hosts/pc-b01", url.Values{"mac": {"52:54:00:0b:00:01"}, "ip": {"10.20.0.99"}, "pool": {"lab-b"}}},
		{"/ui/hosts/pc-b01", url.Values{"mac": {"52:54:00:0b:00:01"}, "ip": {"10.20.0.21"}, "pool": {"lab-a"}}},
		{"/ui/hosts/pc-b01/delete", url.Values{"confirm": {"pc-b01"}}},
		{"/ui/pools/lab-b/import", url.Values{"csv": {"pc-b09,52:54:00:0b:00:09,10.20.0.29,lab-b\n"}, "confirm": {"1"}}},
		{"/ui/pools/lab-b/power", url.Values{"op": {"wake"}, "host": {"pc-b01"}}},
		{"/ui/hosts/pc-b01/power", url.Values{"op": {"wake"}}},
	} {
		c.form.Set("csrf", tok)
		if code, body := alice.post(c.path, c.form); code != http.StatusForbidden {
			t.Errorf("POST %s %v: %d, want 403\n%s", c.path, c.form, code, body)
		}
	}
	// Moving her own host into lab-b: the page is hers, the server's authz refuses.
	code, body = alice.post("/ui/hosts/pc-a01", url.Values{"csrf": {tok}, "mac": {"52:54:00:0a:00:01"}, "ip": {"10.20.0.11"}, "pool": {"lab-b"}})
	if code != http.StatusForbidden || !strings.Contains(body, "where the user has no role") {
		t.Errorf("moving pc-a01 to lab-b: %d", code)
	}
	// A boot server is the site admin's: the authz refusal is shown at that field.
	code, body = alice.post("/ui/pools/lab-a/hosts", url.Values{"csrf": {tok}, "name": {"pc-a09"}, "mac": {"52:54:00:0a:00:09"}, "bootserver": {"bs1"}})
	if code != http.StatusForbidden || !strings.Contains(poolFieldBlock(t, body, "add-bs"), "may not change its bootServer") {
		t.Errorf("pool admin setting a boot server: %d\n%s", code, body)
	}
	if len(e.Svc.Power.Commands("")) != 0 {
		t.Errorf("power commands were recorded: %v", e.Svc.Power.Commands(""))
	}
	after := e.Svc.Snapshot().Site
	if len(after.Hosts) != len(before.Hosts) || after.Host("pc-a01").Pool != "lab-a" || after.Host("pc-b09") != nil || after.Host("pc-a09") != nil {
		t.Fatalf("refused posts changed the site: %+v", after.Hosts)
	}
	if h := after.Host("pc-b01"); h.IP != "10.20.0.21" || h.Pool != "lab-b" {
		t.Fatalf("pc-b01 changed: %+v", h)
	}

	// Her own pool works.
	code, body = alice.post("/ui/pools/lab-a/hosts", url.Values{"csrf": {tok}, "name": {"pc-a09"}, "mac": {"52:54:00:0a:00:09"}})
	if code != http.StatusOK || siteHost(e, "pc-a09") == nil {
		t.Errorf("alice adding to lab-a: %d\n%s", code, body)
	}
}

// TestHostImport: the preview writes nothing and lists the changes; errors carry line
// numbers; Apply writes; a file upload works like a paste.
func TestHostImport(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	admin := newBrowser(t, e)
	admin.login("admin", testenv.AdminPassword)
	tok := admin.csrf("/ui/pools/lab-a/import")
	csv := "name,mac,ip,pool\npc-a10,52:54:00:0a:00:10,10.20.0.30,lab-a\npc-a01,52:54:00:0a:00:01,10.20.0.99,lab-a\n"

	code, body := admin.post("/ui/pools/lab-a/import", url.Values{"csrf": {tok}, "csv": {csv}})
	if code != http.StatusOK {
		t.Fatalf("preview: %d\n%s", code, body)
	}
	for _, want := range []string{"+ pc-a10", "~ pc-a01 (ip)", `name="confirm" value="1"`, "Apply"} {
		if !strings.Contains(body, want) {
			t.Errorf("preview lacks %q", want)
		}
	}
	if siteHost(e, "pc-a10") != nil || siteHost(e, "pc-a01").IP != "10.20.0.11" {
		t.Fatal("the preview wrote")
	}

	for _, c := range []struct{ csv, want string }{
		{"name,mac,ip,pool\npc-a10,52:54:00:0a:00:10,10.20.0.30,lab-a\npc-a11,nonsense,10.20.0.31,lab-a\n", "CSV line 3: invalid MAC address"},
		{"pc-a10,52:54:00:0a:00:10,10.20.0.30,lab-a\npc-b10,52:54:00:0b:00:10,10.20.0.40,lab-b\n", "line 2: host pc-b10 is for pool lab-b"},
		{"pc-a10,52:54:00:0a:00:10,10.20.0.30,lab-a\n\npc-a11,52:54:00:0a:00:11,10.20.0.12,lab-a\n", "line 3: duplicate IP 10.20.0.12"},
	} {
		code, body := admin.post("/ui/pools/lab-a/import", url.Values{"csrf": {tok}, "csv": {c.csv}, "confirm": {"1"}})
		if code < 400 || !strings.Contains(body, c.want) {
			t.Errorf("bad CSV: %d, want an error %q\n%s", code, c.want, body)
		}
	}
	if siteHost(e, "pc-a10") != nil || siteHost(e, "pc-a11") != nil {
		t.Fatal("a CSV with a bad row wrote")
	}

	code, body = admin.post("/ui/pools/lab-a/import", url.Values{"csrf": {tok}, "csv": {csv}, "confirm": {"1"}})
	if code != http.StatusOK || !strings.Contains(body, "CSV imported: 1 hosts added, 1 changed") {
		t.Fatalf("apply: %d\n%s", code, body)
	}
	if h := siteHost(e, "pc-a10"); h == nil || h.IP != "10.20.0.30" {
		t.Fatalf("imported host: %+v", h)
	}
	if h := siteHost(e, "pc-a05"); len(h.Weekly) != 1 {
		t.Errorf("the import touched another host: %+v", h)
	}
	if h := siteHost(e, "pc-a01"); h.IP != "10.20.0.99" {
		t.Errorf("pc-a01 not updated: %+v", h)
	}

	code, body = admin.postCSVFile("/ui/pools/lab-a/import", map[string]string{"csrf": tok}, "hosts.csv", "pc-a12;52:54:00:0a:00:12;10.20.0.32;lab-a\n")
	if code != http.StatusOK || !strings.Contains(body, "+ pc-a12") || siteHost(e, "pc-a12") != nil {
		t.Errorf("upload preview: %d\n%s", code, body)
	}
}

// TestPowerButtons: admins' commands are recorded and the result shown; viewers and
// lecturers are refused and nothing is recorded.
func TestPowerButtons(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	e.ApplyExample(t)
	for _, who := range []string{"dave", "carol"} {
		b := newBrowser(t, e)
		b.login(who, who+"-secret")
		code, body := b.get("/ui/pools/lab-a")
		if code != http.StatusOK || strings.Contains(body, `value="reboot"`) || strings.Contains(body, "Add a host") {
			t.Errorf("%s sees the pool page's controls (%d)", who, code)
		}
		tok := b.csrf("/ui/pools/lab-a")
		if code, _ := b.post("/ui/hosts/pc-a01/power", url.Values{"csrf": {tok}, "op": {"wake"}}); code != http.StatusForbidden {
			t.Errorf("%s power on the host page: %d, want 403", who, code)
		}
		if code, _ := b.post("/ui/pools/lab-a/power", url.Values{"csrf": {tok}, "op": {"reboot"}, "host": {"pc-a01", "pc-a02"}}); code != http.StatusForbidden {
			t.Errorf("%s power on the pool page: %d, want 403", who, code)
		}
		if code, _ := b.post("/ui/pools/lab-a/hosts", url.Values{"csrf": {tok}, "name": {"pc-a09"}, "mac": {"52:54:00:0a:00:09"}}); code != http.StatusForbidden || siteHost(e, "pc-a09") != nil {
			t.Errorf("%s adding a host: %d, want 403", who, code)
		}
	}
	if cmds := e.Svc.Power.Commands(""); len(cmds) != 0 {
		t.Fatalf("refused requests recorded commands: %v", cmds)
	}

	admin := newBrowser(t, e)
	admin.login("admin", testenv.AdminPassword)
	tok := admin.csrf("/ui/pools/lab-a")
	code, body := admin.post("/ui/pools/lab-a/power", url.Values{"csrf": {tok}, "op": {"wake"}, "host": {"pc-a01", "pc-a02"}, "reason": {"lab test"}})
	if code != http.StatusOK || !strings.Contains(body, "wake: 2 accepted, 0 refused") {
		t.Fatalf("wake: %d\n%s", code, body)
	}
	if cmds := e.Svc.Power.Commands("pc-a01"); len(cmds) != 1 || cmds[0].By != "admin" || cmds[0].Reason != "lab test" {
		t.Errorf("recorded: %+v", cmds)
	}
	// No agent runs: the reboot is refused per host with the service's reason.
	code, body = admin.post("/ui/hosts/pc-a03/power", url.Values{"csrf": {tok}, "op": {"reboot"}})
	if code != http.StatusOK || !strings.Contains(body, "refused") || !strings.Contains(body, "agent is not running") {
		t.Errorf("reboot without agent: %d\n%s", code, body)
	}
	if code, body := admin.post("/ui/pools/lab-a/power", url.Values{"csrf": {tok}, "op": {"reboot"}}); code != http.StatusBadRequest || !strings.Contains(body, "select the hosts") {
		t.Errorf("power without hosts: %d", code)
	}
	if code, _ := admin.post("/ui/pools/lab-a/power", url.Values{"csrf": {tok}, "op": {"wake"}, "host": {"pc-b01"}}); code != http.StatusBadRequest {
		t.Errorf("another pool's host on the pool page: %d, want 400", code)
	}
}
