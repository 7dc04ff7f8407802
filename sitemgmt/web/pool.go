package web

// Pool and host pages (docs/admin-guide.md): the pools a user may see, a pool's hosts
// with what they run now, adding, editing and removing hosts, a CSV import with a
// preview, and power commands. Every change is one named operation of the service
// (service.Hosts: Add, Edit, Delete, ReadImport and Import; service.Power.Request), the
// ones the API calls, judged by the user's principal (nothing half-saved); the
// MayAdminPool checks here only decide which controls are shown and refuse early with a
// clear page, the server's authz decides regardless.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// poolRoutes registers the pool and host pages.
func (u *UI) poolRoutes() {
	m := u.mux
	m.HandleFunc("GET "+Prefix+"pools", u.page(u.poolsPage))
	m.HandleFunc("GET "+Prefix+"pools/{name}", u.page(u.poolPage))
	m.HandleFunc("POST "+Prefix+"pools/{name}/hosts", u.page(u.addHost))
	m.HandleFunc("POST "+Prefix+"pools/{name}/power", u.page(u.poolPower))
	m.HandleFunc("GET "+Prefix+"pools/{name}/import", u.page(u.importPage))
	m.HandleFunc("POST "+Prefix+"pools/{name}/import", u.page(u.importPost))
	m.HandleFunc("GET "+Prefix+"hosts/{name}", u.page(u.hostPage))
	m.HandleFunc("POST "+Prefix+"hosts/{name}", u.page(u.editHost))
	m.HandleFunc("POST "+Prefix+"hosts/{name}/delete", u.page(u.deleteHost))
	m.HandleFunc("POST "+Prefix+"hosts/{name}/power", u.page(u.hostPower))
}

// ---- the list of pools ----

type poolsPage struct {
	Page
	Pools []PoolSummary
}

func (u *UI) poolsPage(q *Req) {
	site := q.Snap.Site
	pg := poolsPage{Page: u.Base(q, "Pools", "pools")}
	count := map[string]int{}
	for i := range site.Hosts {
		count[site.Hosts[i].Pool]++
	}
	for _, name := range VisiblePools(q) {
		p := site.Pool(name)
		pg.Pools = append(pg.Pools, PoolSummary{Name: p.Name, Room: p.Room, Description: p.Description,
			Hosts: count[p.Name], CanAdmin: MayAdminPool(q.P, p.Name)})
	}
	u.Render(q, http.StatusOK, "pools", pg)
}

// ---- forms ----

// hostForm is the add or edit form's input and its errors by field (name, mac, ip,
// bootserver, pool); Fields are the fields the form has, so that an error about another
// one is shown for the whole form.
type hostForm struct {
	Name, MAC, IP, BootServer, Pool string
	Err                             map[string]string
	Fields                          []string
}

func readHostForm(q *Req, fields ...string) hostForm {
	v := func(k string) string { return strings.TrimSpace(q.PostFormValue(k)) }
	return hostForm{Name: v("name"), MAC: v("mac"), IP: v("ip"), BootServer: v("bootserver"), Pool: v("pool"),
		Err: map[string]string{}, Fields: fields}
}

func (f *hostForm) has(field string) bool { return slices.Contains(f.Fields, field) }

// fields are what the form sets of a host.
func (f *hostForm) fields() service.HostFields {
	return service.HostFields{MAC: f.MAC, IP: f.IP, BootServer: f.BootServer, Pool: f.Pool}
}

// check validates each field on its own (the model's own validators, so the messages are
// the ones the API gives), before the whole change is tried.
func (f *hostForm) check(site *model.Site, current string) bool {
	if f.Err == nil {
		f.Err = map[string]string{}
	}
	if f.has("name") {
		if err := model.ValidHostname(f.Name); err != nil {
			f.Err["name"] = err.Error()
		} else if site.Host(f.Name) != nil {
			f.Err["name"] = "a host named " + f.Name + " exists already"
		}
	}
	if f.MAC == "" {
		f.Err["mac"] = "enter the PC's MAC address, like 52:54:00:12:34:56"
	} else if _, err := model.NormalizeMAC(f.MAC); err != nil {
		f.Err["mac"] = err.Error()
	} else {
		mac, _ := model.NormalizeMAC(f.MAC)
		for i := range site.Hosts {
			if h := &site.Hosts[i]; h.MAC == mac && h.Name != current {
				f.Err["mac"] = "MAC " + mac + " belongs to host " + h.Name + " already"
			}
		}
	}
	if f.IP != "" {
		if err := model.ValidIP(f.IP); err != nil {
			f.Err["ip"] = err.Error()
		}
	}
	if f.BootServer != "" && site.BootServer(f.BootServer) == nil {
		f.Err["bootserver"] = "unknown boot server " + strconv.Quote(f.BootServer)
	}
	if f.has("pool") && site.Pool(f.Pool) == nil {
		f.Err["pool"] = "unknown pool " + strconv.Quote(f.Pool)
	}
	return len(f.Err) == 0
}

var changesItsRe = regexp.MustCompile(`may not change its ([A-Za-z]+)`)

// errorField is the form field an error of the model or of authz is about ("": the whole
// form). Messages quote user input, but host, pool and boot server names are lower case
// without spaces, so the phrases matched here cannot come from them.
func errorField(err error) string {
	msg := err.Error()
	var forb *authz.Forbidden
	if errors.As(err, &forb) {
		if m := changesItsRe.FindStringSubmatch(msg); m != nil {
			return map[string]string{"mac": "mac", "ip": "ip", "bootServer": "bootserver", "pool": "pool"}[m[1]]
		}
		if strings.Contains(msg, "where the user has no role") {
			return "pool"
		}
		return ""
	}
	switch {
	case strings.Contains(msg, "MAC"):
		return "mac"
	case strings.Contains(msg, "IPv4"), strings.Contains(msg, "duplicate IP"):
		return "ip"
	case strings.Contains(msg, "boot server"):
		return "bootserver"
	case strings.Contains(msg, "unknown pool"):
		return "pool"
	case strings.Contains(msg, "hostname"), strings.Contains(msg, "duplicate host"):
		return "name"
	}
	return ""
}

// failed records err at its field (or returns it as the page's error).
func (f *hostForm) failed(err error) (pageErr string) {
	_, msg := ErrorStatus(err)
	if fld := errorField(err); fld != "" && f.has(fld) {
		f.Err[fld] = msg
		return ""
	}
	return msg
}

// ---- the pool page ----

type poolPage struct {
	Page
	Pool       model.Pool
	BootServer string // the pool's boot server
	CanAdmin   bool
	Rows       []HostRow
	Paging
	Add         hostForm
	BootServers []string
	Power       *powerResult
	PowerError  string
	Selected    map[string]bool
	// Login summarises the desktop login the pool's PCs use ("" : none); OwnLogin: the
	// pool's own, not the site's.
	Login    string
	OwnLogin bool
	// Printing is the print server the pool's PCs use (its own, Pool.Printing, else the
	// site's, SitePrinting; nil: none); Print is its form, PrintFailed when a POST of it
	// was refused.
	Printing, SitePrinting *model.Printing
	Print                  printingForm
	PrintFailed            bool
	// Homes is the home server the pool's PCs use (its own, Pool.Homes, else the site's,
	// SiteHomes; nil: temporary homes); HomesF is its form, HomesFailed when a POST of it
	// was refused. CanEditHomes offers the form: authz's MayChangeAll of the pool's homes
	// (a site admin's alone; service.Entities.PutHomes checks every POST all the same).
	Homes, SiteHomes *model.Homes
	HomesF           homesForm
	HomesFailed      bool
	CanEditHomes     bool
}

// powerResult is the answer to a power request as the pages show it.
type powerResult struct {
	Op                string
	Reason            string
	Hosts             []wire.HostPowerResult
	Accepted, Refused int
}

// poolOf finds the pool of the request's {name} that q's user may see (nil: the error
// page was sent).
func (u *UI) poolOf(q *Req, admin bool) *model.Pool {
	name := q.PathValue("name")
	p := q.Snap.Site.Pool(name)
	if p == nil || !MaySeePool(q.P, name) {
		if p == nil && (q.P.SiteAdmin || q.P.Viewer) {
			u.Fail(q, http.StatusNotFound, "no pool "+strconv.Quote(name))
			return nil
		}
		// Another pool's admin learns nothing of which pools exist.
		u.Fail(q, http.StatusForbidden, "user "+q.P.UID+" may not see pool "+strconv.Quote(name))
		return nil
	}
	if admin && !MayAdminPool(q.P, name) {
		u.Fail(q, http.StatusForbidden, "user "+q.P.UID+" may not change pool "+name+": only a site admin or an admin of the pool may")
		return nil
	}
	return p
}

func (u *UI) poolPage(q *Req) {
	p := u.poolOf(q, false)
	if p == nil {
		return
	}
	u.renderPool(q, p, http.StatusOK, hostForm{Err: map[string]string{}}, nil)
}

func (u *UI) renderPool(q *Req, p *model.Pool, status int, add hostForm, with func(pg *poolPage)) {
	site := q.Snap.Site
	pg := poolPage{Page: u.Base(q, "Pool "+p.Name, "pools"), Pool: *p, BootServer: p.BootServer,
		CanAdmin: MayAdminPool(q.P, p.Name), Add: add,
		Login: loginSummary(site.DesktopLoginFor(p.Name)), OwnLogin: p.DesktopLogin != nil,
		Printing: site.PrintingFor(p.Name), SitePrinting: site.Printing, Print: printingFormOf(p.Printing),
		Homes: site.HomesFor(p.Name), SiteHomes: site.Homes, HomesF: homesFormOf(p.Homes),
		CanEditHomes: q.P.MayChangeAll(site, model.EntityPool, p.Name, "homes")}
	for _, bs := range site.BootServers {
		pg.BootServers = append(pg.BootServers, bs.Name)
	}
	var hosts []*model.Host
	for i := range site.Hosts {
		if site.Hosts[i].Pool == p.Name {
			hosts = append(hosts, &site.Hosts[i])
		}
	}
	var from, to int
	pg.Paging, from, to = pageOf(q, len(hosts), PageSize)
	if from < to {
		pg.Rows = hostRows(q, hosts[from:to], u.statusMap(q))
	}
	if e := add.Err["form"]; e != "" {
		pg.Error = e
	} else if status >= 400 && len(add.Err) > 0 {
		pg.Error = "the host was not added: see the marked fields"
	}
	if with != nil {
		with(&pg)
	}
	u.Render(q, status, "pool", pg)
}

func (u *UI) addHost(q *Req) {
	p := u.poolOf(q, true)
	if p == nil {
		return
	}
	f := readHostForm(q, "name", "mac", "ip", "bootserver")
	f.Pool = p.Name
	if !f.check(q.Snap.Site, "") {
		u.renderPool(q, p, http.StatusBadRequest, f, nil)
		return
	}
	changes, err := u.svc.Hosts.Add(q.Context(), q.P.Check, f.Name, f.fields())
	u.wrote(false, changes, err)
	if err != nil {
		status, _ := ErrorStatus(err)
		if pe := f.failed(err); pe != "" {
			f.Err["form"] = pe
		}
		u.opt.Log.Info("UI: add host refused", "user", q.P.UID, "host", f.Name, "err", err)
		u.renderPool(q, p, status, f, nil)
		return
	}
	u.Done(q, Prefix+"pools/"+p.Name, "host "+f.Name+" added")
}

// ---- power ----

// parsePowerOp is the form's op as a wire.PowerOp (ok false: not one).
func parsePowerOp(s string) (wire.PowerOp, bool) {
	op := wire.PowerOp(s)
	return op, slices.Contains(wire.PowerOps, op)
}

// requestPower checks every host (all or nothing) and asks the service.
func (u *UI) requestPower(q *Req, op wire.PowerOp, hosts []*model.Host, reason string) (*powerResult, int, error) {
	names := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if err := q.P.CheckPower(h, string(op)); err != nil {
			return nil, http.StatusForbidden, err
		}
		names = append(names, h.Name)
	}
	res, err := u.svc.Power.Request(q.Context(), q.P.UID, op, names, false, reason, q.Now)
	if err != nil {
		status, _ := ErrorStatus(err)
		return nil, status, err
	}
	pr := &powerResult{Op: string(res.Op), Reason: reason, Hosts: res.Hosts}
	for _, h := range res.Hosts {
		if h.Accepted {
			pr.Accepted++
		} else {
			pr.Refused++
		}
	}
	u.opt.Log.Info("UI power request", "user", q.P.UID, "op", op, "hosts", len(names), "accepted", pr.Accepted)
	return pr, http.StatusOK, nil
}

func (u *UI) poolPower(q *Req) {
	p := u.poolOf(q, true)
	if p == nil {
		return
	}
	op, ok := parsePowerOp(q.PostFormValue("op"))
	if !ok {
		u.Fail(q, http.StatusBadRequest, "unknown power operation "+strconv.Quote(q.PostFormValue("op")))
		return
	}
	if err := q.ParseForm(); err != nil {
		u.Fail(q, http.StatusBadRequest, "form: "+err.Error())
		return
	}
	site := q.Snap.Site
	selected := map[string]bool{}
	var hosts []*model.Host
	for _, name := range q.PostForm["host"] {
		h := site.Host(name)
		if h == nil || h.Pool != p.Name {
			u.Fail(q, http.StatusBadRequest, "host "+strconv.Quote(name)+" is not in pool "+p.Name)
			return
		}
		if !selected[name] {
			selected[name] = true
			hosts = append(hosts, h)
		}
	}
	f := hostForm{Err: map[string]string{}}
	if len(hosts) == 0 {
		u.renderPool(q, p, http.StatusBadRequest, f, func(pg *poolPage) {
			pg.PowerError = "select the hosts to " + string(op) + " first"
		})
		return
	}
	reason := strings.TrimSpace(q.PostFormValue("reason"))
	pr, status, err := u.requestPower(q, op, hosts, reason)
	if err != nil {
		if status == http.StatusForbidden {
			u.Fail(q, status, err.Error())
			return
		}
		u.renderPool(q, p, status, f, func(pg *poolPage) { pg.PowerError, pg.Selected = err.Error(), selected })
		return
	}
	u.renderPool(q, p, http.StatusOK, f, func(pg *poolPage) { pg.Power, pg.Selected = pr, selected })
}

// ---- the host page ----

type hostPage struct {
	Page
	Host        model.Host
	Row         HostRow
	BootServer  string // in force: the host's own or its pool's
	Status      *wire.AgentStatus
	Weekly      []string
	CanAdmin    bool
	Edit        hostForm
	PoolNames   []string // pools the host may be moved to
	BootServers []string
	Power       *powerResult
	PowerError  string
	DeleteError string
	Commands    []wire.PowerRecord
}

// hostOf finds the request's host in a pool q's user may see (nil: the error page was
// sent).
func (u *UI) hostOf(q *Req, admin bool) *model.Host {
	name := q.PathValue("name")
	h := q.Snap.Site.Host(name)
	if h == nil || !MaySeePool(q.P, h.Pool) {
		if h == nil && (q.P.SiteAdmin || q.P.Viewer) {
			u.Fail(q, http.StatusNotFound, "no host "+strconv.Quote(name))
			return nil
		}
		u.Fail(q, http.StatusForbidden, "user "+q.P.UID+" may not see host "+strconv.Quote(name))
		return nil
	}
	if admin && !MayAdminPool(q.P, h.Pool) {
		u.Fail(q, http.StatusForbidden, "user "+q.P.UID+" may not change host "+name+": only a site admin or an admin of pool "+h.Pool+" may")
		return nil
	}
	return h
}

func (u *UI) hostPage(q *Req) {
	h := u.hostOf(q, false)
	if h == nil {
		return
	}
	f := hostForm{MAC: h.MAC, IP: h.IP, BootServer: h.BootServer, Pool: h.Pool, Err: map[string]string{}}
	u.renderHost(q, h, http.StatusOK, f, nil)
}

func (u *UI) renderHost(q *Req, h *model.Host, status int, f hostForm, with func(pg *hostPage)) {
	site := q.Snap.Site
	statuses := u.statusMap(q)
	pg := hostPage{Page: u.Base(q, "Host "+h.Name, "pools"), Host: *h, BootServer: site.HostBootServer(h),
		Status: statuses[h.Name], Weekly: h.Weekly, CanAdmin: MayAdminPool(q.P, h.Pool), Edit: f}
	pg.Row = hostRows(q, []*model.Host{h}, statuses)[0]
	for _, bs := range site.BootServers {
		pg.BootServers = append(pg.BootServers, bs.Name)
	}
	for _, p := range site.Pools {
		if p.Name == h.Pool || MayAdminPool(q.P, p.Name) {
			pg.PoolNames = append(pg.PoolNames, p.Name)
		}
	}
	pg.Commands = u.svc.Power.Commands(h.Name)
	if len(pg.Commands) > 10 {
		pg.Commands = pg.Commands[:10]
	}
	for i := range pg.Commands { // shown in site time, as the footer's clock
		pg.Commands[i].Requested = pg.Commands[i].Requested.In(q.Snap.Engine.Location())
	}
	if e := f.Err["form"]; e != "" {
		pg.Error = e
	} else if status >= 400 && len(f.Err) > 0 {
		pg.Error = "the host was not changed: see the marked fields"
	}
	if with != nil {
		with(&pg)
	}
	u.Render(q, status, "host", pg)
}

func (u *UI) editHost(q *Req) {
	h := u.hostOf(q, true)
	if h == nil {
		return
	}
	f := readHostForm(q, "mac", "ip", "bootserver", "pool")
	if f.Pool == "" {
		f.Pool = h.Pool
	}
	if !f.check(q.Snap.Site, h.Name) {
		u.renderHost(q, h, http.StatusBadRequest, f, nil)
		return
	}
	name := h.Name
	changes, err := u.svc.Hosts.Edit(q.Context(), q.P.Check, name, f.fields())
	u.wrote(false, changes, err)
	if err != nil {
		status, _ := ErrorStatus(err)
		if pe := f.failed(err); pe != "" {
			f.Err["form"] = pe
		}
		u.renderHost(q, h, status, f, nil)
		return
	}
	msg := "host " + name + " saved"
	if len(changes) == 0 {
		msg = "host " + name + ": nothing changed"
	}
	u.Done(q, Prefix+"hosts/"+name, msg)
}

func (u *UI) deleteHost(q *Req) {
	h := u.hostOf(q, true)
	if h == nil {
		return
	}
	f := hostForm{MAC: h.MAC, IP: h.IP, BootServer: h.BootServer, Pool: h.Pool, Err: map[string]string{}}
	if q.PostFormValue("confirm") != h.Name {
		u.renderHost(q, h, http.StatusBadRequest, f, func(pg *hostPage) {
			pg.DeleteError = "type the host's name, " + h.Name + ", to confirm its removal"
		})
		return
	}
	name, pool := h.Name, h.Pool
	changes, err := u.svc.Hosts.Delete(q.Context(), q.P.Check, name)
	u.wrote(false, changes, err)
	if err != nil {
		status, msg := ErrorStatus(err)
		u.renderHost(q, h, status, f, func(pg *hostPage) { pg.DeleteError = msg })
		return
	}
	u.Done(q, Prefix+"pools/"+pool, "host "+name+" removed")
}

func (u *UI) hostPower(q *Req) {
	h := u.hostOf(q, false)
	if h == nil {
		return
	}
	op, ok := parsePowerOp(q.PostFormValue("op"))
	if !ok {
		u.Fail(q, http.StatusBadRequest, "unknown power operation "+strconv.Quote(q.PostFormValue("op")))
		return
	}
	reason := strings.TrimSpace(q.PostFormValue("reason"))
	f := hostForm{MAC: h.MAC, IP: h.IP, BootServer: h.BootServer, Pool: h.Pool, Err: map[string]string{}}
	pr, status, err := u.requestPower(q, op, []*model.Host{h}, reason)
	if err != nil {
		if status == http.StatusForbidden {
			u.Fail(q, status, err.Error())
			return
		}
		u.renderHost(q, h, status, f, func(pg *hostPage) { pg.PowerError = err.Error() })
		return
	}
	u.renderHost(q, h, http.StatusOK, f, func(pg *hostPage) { pg.Power = pr })
}

// ---- CSV import ----

type importPage struct {
	Page
	Pool                     string
	CSV                      string
	Errors                   []string
	Previewed                bool // a clean preview: offer Apply
	Added, Modified, Removed []model.Change
	Other                    []model.Change
}

func (u *UI) importPage(q *Req) {
	p := u.poolOf(q, true)
	if p == nil {
		return
	}
	u.Render(q, http.StatusOK, "import", importPage{Page: u.Base(q, "Import hosts into "+p.Name, "pools"), Pool: p.Name})
}

// maxCSV bounds an uploaded or pasted CSV file.
const maxCSV = 8 << 20

// importPost previews (dry run) or, with confirm=1, applies a CSV of hosts for the pool:
// the API's operation (service.Hosts.ReadImport, Import), with the pool page's rule that
// rows must be hosts of this pool. Nothing is written at preview or when any row is wrong.
func (u *UI) importPost(q *Req) {
	p := u.poolOf(q, true)
	if p == nil {
		return
	}
	pg := importPage{Page: u.Base(q, "Import hosts into "+p.Name, "pools"), Pool: p.Name}
	again := func(status int) { u.Render(q, status, "import", pg) }
	data := q.PostFormValue("csv")
	if file, hdr, err := q.FormFile("file"); err == nil {
		defer file.Close()
		if hdr.Size > 0 {
			b, err := io.ReadAll(io.LimitReader(file, maxCSV+1))
			if err != nil || len(b) > maxCSV {
				pg.Errors = []string{fmt.Sprintf("the file could not be read or is larger than %d MiB", maxCSV>>20)}
				again(http.StatusBadRequest)
				return
			}
			data = string(b)
		}
	}
	if len(data) > maxCSV {
		pg.Errors = []string{fmt.Sprintf("the CSV is larger than %d MiB", maxCSV>>20)}
		again(http.StatusBadRequest)
		return
	}
	pg.CSV = data
	if strings.TrimSpace(data) == "" {
		pg.Errors = []string{"paste the CSV or choose a file"}
		again(http.StatusBadRequest)
		return
	}
	hosts, refused, err := u.svc.Hosts.ReadImport(strings.NewReader(data), p.Name)
	if err != nil {
		pg.Errors = []string{err.Error()}
		status, _ := ErrorStatus(err)
		again(status)
		return
	}
	lines := csvLines(data, hosts)
	for _, r := range refused {
		pg.Errors = append(pg.Errors, lineLabel(lines, r.Host)+r.Problem)
	}
	if len(pg.Errors) > 0 {
		again(http.StatusBadRequest)
		return
	}
	apply := q.PostFormValue("confirm") == "1"
	changes, err := u.svc.Hosts.Import(q.Context(), q.P.Check, hosts, !apply)
	u.wrote(!apply, changes, err)
	if err != nil {
		status, msg := ErrorStatus(err)
		pg.Errors = []string{annotateLine(msg, lines)}
		again(status)
		return
	}
	for _, c := range changes {
		switch {
		case c.Kind != model.EntityHost:
			pg.Other = append(pg.Other, c)
		case c.Op == model.OpAdd:
			pg.Added = append(pg.Added, c)
		case c.Op == model.OpDelete:
			pg.Removed = append(pg.Removed, c)
		default:
			pg.Modified = append(pg.Modified, c)
		}
	}
	if apply {
		u.Done(q, Prefix+"pools/"+p.Name, fmt.Sprintf("CSV imported: %d hosts added, %d changed", len(pg.Added), len(pg.Modified)))
		return
	}
	pg.Previewed = true
	again(http.StatusOK)
}

// csvLines finds the line of each imported host in the CSV (for messages: the parser
// reports lines only for its own errors): the first line with a field equal to the name.
func csvLines(data string, hosts []model.Host) map[string]int {
	want := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		want[h.Name] = true
	}
	out := make(map[string]int, len(hosts))
	for i, line := range strings.Split(data, "\n") {
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ';' || r == '\t' }) {
			f = strings.Trim(strings.TrimSpace(f), `"`)
			if want[f] {
				if _, ok := out[f]; !ok {
					out[f] = i + 1
				}
				break
			}
		}
	}
	return out
}

func lineLabel(lines map[string]int, host string) string {
	if n, ok := lines[host]; ok {
		return fmt.Sprintf("line %d: ", n)
	}
	return ""
}

var hostTokenRe = regexp.MustCompile(`[a-z0-9][a-z0-9-]*`)

// annotateLine prefixes a message about an imported host with that host's line.
func annotateLine(msg string, lines map[string]int) string {
	for _, tok := range hostTokenRe.FindAllString(msg, -1) {
		if n, ok := lines[tok]; ok {
			return fmt.Sprintf("line %d: %s", n, msg)
		}
	}
	return msg
}
