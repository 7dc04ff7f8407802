// Package api is the HTTP face of the site manager: the JSON REST API (described by
// docs/api/openapi.yaml, which a test checks against this server), the per-request boot
// script endpoints that PXE clients fetch (unauthenticated: firmware cannot log in), and
// rendered configuration for boot servers, Slurm and NFS. People authenticate as
// directory users (HTTP Basic, checked by an LDAP bind); node agents with their host's
// bearer token, which opens only the agent endpoints (agent.go, docs/agent-api.md).
package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/errstatus"
	"github.com/overtime-hpc/overtime/sitemgmt/imagestore"
	"github.com/overtime-hpc/overtime/sitemgmt/loginguard"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/sitemgmt/trustproxy"
	"github.com/overtime-hpc/overtime/sitemgmt/web"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Options configure the server.
type Options struct {
	// BootServer is the boot server this instance speaks for: it serves unknown MACs and
	// hosts whose own and pool's boot server are unset (resolve.Query.BootServer has the
	// whole fallback rule). Empty: the site's first boot server.
	BootServer string
	// MenuTimeout is how long a boot menu waits before booting the scheduled mode.
	MenuTimeout time.Duration
	// Now is the clock; tests and demos inject a fixed instant. Default time.Now.
	Now func() time.Time
	// AuthCacheTTL is how long a successful LDAP bind is remembered (keyed by a salted
	// hash of uid and password), so that a CLI session does not bind on every request.
	AuthCacheTTL time.Duration
	// HostAuthOutageGrace is how long after its last verification against the directory
	// a host token stays accepted while the directory cannot be asked (default 24 h), so
	// that an outage of the directory does not stop heartbeats; see hostAuthCache.
	HostAuthOutageGrace time.Duration
	Log                 *slog.Logger

	// Boot files served over HTTP (files.go); empty: not served by this instance.
	// ImagesDir is the published image tree ({ImagesDir}/{version path}/vmlinuz,
	// initrd.img, root.squashfs), normally the directory the boot server exports over
	// NFS; when set, menu entries whose files are missing there are shown unavailable.
	ImagesDir string
	// FilesDir holds kernels and initrds that modes name themselves (/files/...).
	FilesDir string
	// MungeKeyFile is the cluster's munge key, handed to node agents whose compute guest
	// runs now (GET /api/v1/agent/guest-secrets); empty: none is handed out.
	MungeKeyFile string
	// DesktopSecrets is the directory of the desktops' login secrets (the directory's
	// bind password, a keytab per PC: sitemgmt/seatconf.SecretDir), handed to each PC
	// with its login configuration (GET /api/v1/agent/seat); empty: none.
	DesktopSecrets string
	// SyslinuxDir holds ldlinux.c32, menu.c32 and the libraries lpxelinux loads over
	// HTTP (Debian: /usr/lib/syslinux/modules/bios).
	SyslinuxDir string
	// MaxUpload bounds one uploaded image artefact (upload.go; default DefaultMaxUpload,
	// 64 GiB); UploadsPerUser the uploads one user may have in flight (default
	// DefaultUploadsPerUser). Uploads need ImagesDir: they are staged and published there.
	MaxUpload      int64
	UploadsPerUser int
	// StagedPerUser bounds the bytes one user keeps in unpublished uploads (default
	// imagestore.DefaultStagedPerUser); a staged version untouched for StagingTTL is
	// removed at the next upload (default imagestore.DefaultStagingTTL).
	StagedPerUser int64
	StagingTTL    time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For and X-Forwarded-Proto
	// are believed (`overtime serve --trusted-proxy`): the client address the login
	// throttle counts, and whether the UI's session cookie is Secure. Nobody by default.
	TrustedProxies trustproxy.Proxies
	// CAPin is the pin of the CA that ends this server's TLS chain (vocab/capin; `overtime
	// serve --tls-cert`): written into every host credential issued here, so that the PC
	// sends its token only over TLS to a server that CA vouches for. Empty: none.
	CAPin string
	// InsecureHTTP hands guest secrets and desktop login secrets to agents over plain
	// HTTP (`overtime serve --insecure-http`, labs only); otherwise they go over TLS only.
	InsecureHTTP bool
}

// Server serves the API and boot endpoints.
type Server struct {
	svc      *service.Service
	opt      Options
	mux      *http.ServeMux
	auth     authCache
	hostAuth hostAuthCache
	bodies   bodyBudget
	metrics  *metrics // GET /metrics (metrics.go)

	// store is the image store, when ImagesDir is set (upload.go).
	store *imagestore.Store
}

// New builds the handler tree.
func New(svc *service.Service, opt Options) *Server {
	if opt.MenuTimeout == 0 {
		opt.MenuTimeout = 5 * time.Second
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.AuthCacheTTL == 0 {
		opt.AuthCacheTTL = time.Minute
	}
	if opt.HostAuthOutageGrace == 0 {
		opt.HostAuthOutageGrace = 24 * time.Hour
	}
	if opt.Log == nil {
		opt.Log = slog.Default()
	}
	if opt.MaxUpload <= 0 {
		opt.MaxUpload = DefaultMaxUpload
	}
	if opt.UploadsPerUser <= 0 {
		opt.UploadsPerUser = DefaultUploadsPerUser
	}
	if opt.StagedPerUser <= 0 {
		opt.StagedPerUser = imagestore.DefaultStagedPerUser
	}
	if opt.StagingTTL <= 0 {
		opt.StagingTTL = imagestore.DefaultStagingTTL
	}
	s := &Server{svc: svc, opt: opt, mux: http.NewServeMux()}
	s.auth.init(opt.AuthCacheTTL)
	s.hostAuth.init(opt.AuthCacheTTL, opt.HostAuthOutageGrace)
	s.bodies.init(perUserBodies)
	s.metrics = newMetrics(s)
	s.routes()
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w, done := s.observe(w, r)
	defer done()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v) // net/http's way to abort a response: not a bug
			}
			s.opt.Log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			writeError(w, http.StatusInternalServerError, "internal error")
		}
	}()
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /healthz", s.healthz)
	m.HandleFunc("GET /readyz", s.readyz)
	m.Handle("GET /metrics", s.metrics.handler())

	// Boot endpoints: unauthenticated, rendered per request from the current slot.
	m.HandleFunc("GET /boot/ipxe", s.bootChain)
	m.HandleFunc("GET /boot/ipxe/{mac}", s.bootIPXE)
	m.HandleFunc("GET /pxelinux.cfg/{file}", s.bootPXELinux)

	// REST API.
	m.HandleFunc("GET /api/v1/whoami", s.read(s.whoami))
	m.HandleFunc("GET /api/v1/site", s.read(s.getSite))
	m.HandleFunc("PUT /api/v1/site", s.write(s.putSite))
	m.HandleFunc("GET /api/v1/site/settings", s.read(s.getSettings))
	m.HandleFunc("PUT /api/v1/site/settings", s.write(s.putSettings))
	m.HandleFunc("GET /api/v1/site/desktop-login", s.read(s.getDesktopLogin))
	m.HandleFunc("PUT /api/v1/site/desktop-login", s.write(s.putDesktopLogin))
	m.HandleFunc("DELETE /api/v1/site/desktop-login", s.write(s.deleteDesktopLogin))
	m.HandleFunc("GET /api/v1/site/homes", s.read(s.getHomes))
	m.HandleFunc("PUT /api/v1/site/homes", s.write(s.putHomes))
	m.HandleFunc("DELETE /api/v1/site/homes", s.write(s.deleteHomes))
	m.HandleFunc("GET /api/v1/mode-at", s.read(s.modeAt))
	m.HandleFunc("GET /api/v1/render/{what}", s.read(s.render))
	m.HandleFunc("POST /api/v1/hosts/import", s.user(mayImportHosts, s.importHosts))
	m.HandleFunc("POST /api/v1/images/{name}/versions", s.write(s.addImageVersion))
	s.uploadRoutes()
	m.HandleFunc("POST /api/v1/users", s.write(s.putUser))
	s.userRoutes()
	registerCollections(s)
	s.agentRoutes()
	s.slurmRoutes()
	s.fileRoutes()
	s.imageRoutes()
	s.powerRoutes()

	// The web interface (sitemgmt/web): same service, same identities, its own sessions.
	m.Handle(web.Prefix, web.New(s.svc, web.Options{Now: s.opt.Now, Log: s.opt.Log, BootServer: s.opt.BootServer,
		OnWrite: s.metrics.siteWrite, TrustedProxies: s.opt.TrustedProxies}))
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, web.Prefix, http.StatusSeeOther)
	})
}

// healthz is liveness: it answers 200 as long as the server serves (boot scripts and
// agent configurations come from the snapshot, which outlives a directory outage), and
// says honestly whether the directory answered at the last contact: status "ok", or
// "degraded" with the reason, since when, and the age of the snapshot being served.
// readyz is the same body with 503 while degraded, for probes that must tell.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	_, body := s.health()
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	code, body := s.health()
	writeJSON(w, code, body)
}

func (s *Server) health() (int, map[string]any) {
	snap := s.svc.Snapshot()
	body := map[string]any{
		"status": "ok", "site": snap.Site.Name, "hosts": len(snap.Site.Hosts),
		"loaded": snap.Loaded.UTC().Format(time.RFC3339),
	}
	code := http.StatusOK
	var reasons []string
	if dir := s.svc.Accounts.Directory(); !dir.Reachable {
		code = http.StatusServiceUnavailable
		reasons = append(reasons, "directory unavailable: "+dir.Err)
		body["directory_down_since"] = dir.DownSince.UTC().Format(time.RFC3339)
		body["snapshot_age_seconds"] = int64(time.Since(snap.Loaded).Seconds())
	}
	// The external directory's outage degrades the server (its users get 503) but does
	// not make it unready: boot scripts, agents and local users are served as before,
	// and pulling every replica out of a load balancer would stop all of that too.
	if ext, ok := s.svc.Accounts.External(); ok && !ext.Reachable {
		reasons = append(reasons, "external directory unavailable: "+ext.Err)
		body["external_directory_down_since"] = ext.DownSince.UTC().Format(time.RFC3339)
	}
	if len(reasons) > 0 {
		body["status"] = "degraded"
		body["reason"] = strings.Join(reasons, "; ")
	}
	return code, body
}

// ---- errors and JSON ----

type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Error: oneLine(msg)})
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", " ") }

// httpError maps the error types of the lower layers to a status code.
func (s *Server) httpError(w http.ResponseWriter, err error) {
	status, msg, internal := errstatus.Of(err)
	if internal {
		s.opt.Log.Error("request failed", "err", err)
	}
	writeError(w, status, msg)
}

// maxBody bounds every request body (a whole site as JSON or a hosts CSV fits many
// times over).
const maxBody = 32 << 20

// readBody reads a request body of at most maxBody bytes (less when the handler set a
// tighter http.MaxBytesReader), refusing a declared length over the limit before
// reading anything. Over the limit: tooLarge (413).
func readBody(r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBody {
		return nil, errstatus.TooLarge{Limit: maxBody}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, errstatus.TooLarge{Limit: mbe.Limit}
	}
	if err != nil {
		return nil, model.Invalid("request body: %v", err)
	}
	return body, nil
}

// decodeJSON reads a JSON body strictly: unknown fields are errors (typos must not be
// silently dropped), the body is bounded (readBody), and it must be a JSON object: every
// body the API takes is one, and `null` would otherwise decode to nothing at all, so
// that a PUT of null replaced an entity with an empty one.
func decodeJSON(r *http.Request, v any) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return model.Invalid("invalid JSON body: expected a JSON object {...}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return model.Invalid("invalid JSON body: %v", err)
	}
	if dec.More() {
		return model.Invalid("invalid JSON body: trailing data")
	}
	return nil
}

func dryRun(r *http.Request) bool {
	v := r.URL.Query().Get("dryRun")
	return v == "true" || v == "1"
}

// ---- authentication ----

type ctxKey struct{}

// principal returns the authenticated principal stored by read/write.
func principal(r *http.Request) authz.Principal {
	return r.Context().Value(ctxKey{}).(authz.Principal)
}

type authCache struct {
	mu   sync.Mutex
	ttl  time.Duration
	salt [32]byte
	ok   map[string]authEntry
}

type authEntry struct {
	sum     [32]byte
	expires time.Time
	login   service.Login // who it was: local, or external with its mapped roles
}

func (c *authCache) init(ttl time.Duration) {
	c.ttl = ttl
	c.ok = map[string]authEntry{}
	_, _ = rand.Read(c.salt[:])
}

func (c *authCache) sum(uid, pw string) [32]byte {
	h := sha256.New()
	h.Write(c.salt[:])
	h.Write([]byte(uid))
	h.Write([]byte{0})
	h.Write([]byte(pw))
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

func (c *authCache) hit(uid, pw string, now time.Time) (service.Login, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.ok[uid]
	if !ok || now.After(e.expires) {
		return service.Login{}, false
	}
	s := c.sum(uid, pw)
	return e.login, subtle.ConstantTimeCompare(s[:], e.sum[:]) == 1
}

func (c *authCache) store(uid, pw string, login service.Login, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok[uid] = authEntry{sum: c.sum(uid, pw), expires: now.Add(c.ttl), login: login}
}

// authenticate checks HTTP Basic credentials by an LDAP bind as the user (Overtime's own
// directory first, then the external one: service.Accounts.Login), or a node agent's
// bearer token (authenticateHost). Roles: the site's grants for the uid and, for an
// external user, those its groups map to.
//
// Failed logins are throttled by the service (per uid and per client address, the
// address a trusted proxy states: Options.TrustedProxies); a throttled attempt is
// answered 429 with Retry-After before the password is compared, with the cache too.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (authz.Principal, bool) {
	if tok, ok := bearerToken(r); ok {
		return s.authenticateHost(w, r, tok)
	}
	uid, pw, ok := r.BasicAuth()
	if !ok || uid == "" || pw == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="overtime"`)
		writeError(w, http.StatusUnauthorized, "authentication required (HTTP Basic, directory user)")
		return authz.Principal{}, false
	}
	if err := model.ValidUID(uid); err != nil {
		// No such user can exist: nothing to guess, nothing to count.
		w.Header().Set("WWW-Authenticate", `Basic realm="overtime"`)
		writeError(w, http.StatusUnauthorized, "invalid credentials")
		return authz.Principal{}, false
	}
	from := s.opt.TrustedProxies.Client(r)
	throttled := func(err error) bool {
		wait, ok := service.IsThrottled(err)
		if ok {
			s.opt.Log.Info("login throttled", "uid", uid, "from", from.String(), "wait", wait.String())
			w.Header().Set("Retry-After", loginguard.RetryAfter(wait))
			writeError(w, http.StatusTooManyRequests, err.Error())
		}
		return ok
	}
	if throttled(s.svc.Accounts.LoginAllowed(uid, from)) {
		return authz.Principal{}, false
	}
	now := time.Now()
	login, ok := s.auth.hit(uid, pw, now)
	if !ok {
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		var err error
		login, err = s.svc.Accounts.Login(ctx, uid, pw, from)
		if throttled(err) {
			return authz.Principal{}, false
		}
		if err != nil && !service.IsInvalidCredentials(err) {
			// A directory (ours or the external one) could not be asked: a 401 would
			// tell the user their password is wrong.
			s.opt.Log.Error("authenticating a user failed", "uid", uid, "err", err)
			writeError(w, http.StatusServiceUnavailable, "directory unavailable; try again")
			return authz.Principal{}, false
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="overtime"`)
			writeError(w, http.StatusUnauthorized, "invalid credentials")
			return authz.Principal{}, false
		}
		s.auth.store(uid, pw, login, now)
	}
	p := authz.For(s.svc.Snapshot().Site, uid, login.Grants...)
	p.External = login.External
	return p, true
}

// hostOnlyAgent is the refusal for a host credential outside the agent's endpoints.
func hostOnlyAgent(host string) string {
	return "host " + host + ": a host credential may only fetch its agent configuration (GET /api/v1/agent/config), post heartbeats (POST /api/v1/agent/heartbeat) and job reports (POST /api/v1/agent/jobs)"
}

// read wraps a handler that needs any role.
func (s *Server) read(h http.HandlerFunc) http.HandlerFunc { return s.user(canRead, h) }

// anyUser wraps a handler any authenticated directory user may call, with or without a
// role in the site (HPC users read their own jobs' reports); host credentials are refused.
func (s *Server) anyUser(h http.HandlerFunc) http.HandlerFunc { return s.user(nil, h) }

// write wraps a handler that changes the site; the handler authorises the concrete
// change through update(). A user whose roles allow no change at all (a viewer) is
// refused here, before a byte of the body is read.
func (s *Server) write(h http.HandlerFunc) http.HandlerFunc { return s.user(canWrite, h) }

// canRead and canWrite say why p may not call a read or write endpoint ("": may).
func canRead(p authz.Principal) string {
	if !p.CanRead() {
		return "user " + p.UID + " has no role in this site"
	}
	return ""
}

func canWrite(p authz.Principal) string {
	if why := canRead(p); why != "" {
		return why
	}
	// Every change needs one of these roles (authz.Principal.Check); a viewer only reads.
	if !p.SiteAdmin && len(p.PoolAdmin) == 0 && len(p.Lecturer) == 0 {
		return "user " + p.UID + " may not change the site: a viewer only reads"
	}
	return ""
}

// user authenticates a directory user, refuses host credentials and users allow refuses
// (nil: any user), then runs h with the principal in the context and its request body
// admitted by the per-user budget (bodies).
func (s *Server) user(allow func(authz.Principal) string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		if p.IsHost() {
			writeError(w, http.StatusForbidden, hostOnlyAgent(p.Host))
			return
		}
		if allow != nil {
			if why := allow(p); why != "" {
				writeError(w, http.StatusForbidden, why)
				return
			}
		}
		release, ok := s.admitBody(w, r, p.UID, maxBody, s.bodies.limit)
		if !ok {
			return
		}
		defer release()
		h(w, r.WithContext(s.contextWith(r, p)))
	}
}

// contextWith is r's context carrying the authenticated principal (principal reads it).
func (s *Server) contextWith(r *http.Request, p authz.Principal) context.Context {
	// The service's audit trail records who made a site write, on the API's clock.
	return service.WithUser(context.WithValue(r.Context(), ctxKey{}, p), p.UID, s.opt.Now)
}

// admitBody reserves r's body against uid's budget (bodyBudget.admitUpTo); when it is
// refused, it answers (413 for a body over maxOne, 429 with Retry-After beyond the
// budget) and ok is false.
func (s *Server) admitBody(w http.ResponseWriter, r *http.Request, uid string, maxOne, budget int64) (release func(), ok bool) {
	release, err := s.bodies.admitUpTo(uid, r, maxOne, budget)
	if err == nil {
		return release, true
	}
	if errors.As(err, new(errstatus.TooLarge)) {
		s.httpError(w, err)
	} else {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, err.Error())
	}
	return nil, false
}

// written answers a site write (a named operation's or update's): the error, or
// okStatus (200 when nothing changed) with the change list; and counts it.
func (s *Server) written(w http.ResponseWriter, r *http.Request, okStatus int, changes []model.Change, err error) {
	s.metrics.siteWrite(dryRun(r), changes, err)
	if err != nil {
		s.httpError(w, err)
		return
	}
	if len(changes) == 0 {
		okStatus = http.StatusOK
	}
	writeJSON(w, okStatus, map[string]any{"dryRun": dryRun(r), "changes": changeList(changes)})
}

func changeList(changes []model.Change) []string {
	out := make([]string, 0, len(changes))
	for _, c := range changes {
		out = append(out, c.String())
	}
	return out
}

// ---- misc endpoints ----

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	writeJSON(w, http.StatusOK, map[string]any{"uid": p.UID, "roles": p.Roles()})
}

func (s *Server) getSite(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.svc.Snapshot().Site)
}

// putSite replaces what the site file manages (declarative apply): everything except
// bookings, the exceptions and weekly rules users added through the API, which stay
// unless the file names them (service.Bookings.ApplySiteFile). Only the difference is
// written.
func (s *Server) putSite(w http.ResponseWriter, r *http.Request) {
	var next model.Site
	if err := decodeJSON(r, &next); err != nil {
		s.httpError(w, err)
		return
	}
	changes, err := s.svc.Bookings.ApplySiteFile(r.Context(), principal(r), dryRun(r), &next)
	s.written(w, r, http.StatusOK, changes, err)
}

// Settings are the site entry's own attributes.
type Settings = service.Settings

func (s *Server) getSettings(w http.ResponseWriter, r *http.Request) {
	site := s.svc.Snapshot().Site
	writeJSON(w, http.StatusOK, Settings{Name: site.Name, Timezone: site.Timezone, DefaultMode: site.DefaultMode, UnknownMode: site.UnknownMode})
}

func (s *Server) putSettings(w http.ResponseWriter, r *http.Request) {
	var in Settings
	if err := decodeJSON(r, &in); err != nil {
		s.httpError(w, err)
		return
	}
	changes, err := s.svc.Entities.PutSettings(r.Context(), principal(r), dryRun(r), in)
	s.written(w, r, http.StatusOK, changes, err)
}

// getDesktopLogin answers the site's desktopLogin (404 when it has none); a pool's own
// is part of the pool.
func (s *Server) getDesktopLogin(w http.ResponseWriter, r *http.Request) {
	d := s.svc.Snapshot().Site.DesktopLogin
	if d == nil {
		s.httpError(w, model.NotFound("desktop login configuration", "site"))
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) putDesktopLogin(w http.ResponseWriter, r *http.Request) {
	var in model.DesktopLogin
	if err := decodeJSON(r, &in); err != nil {
		s.httpError(w, err)
		return
	}
	changes, err := s.svc.Entities.PutDesktopLogin(r.Context(), principal(r), dryRun(r), "", &in)
	s.written(w, r, http.StatusOK, changes, err)
}

func (s *Server) deleteDesktopLogin(w http.ResponseWriter, r *http.Request) {
	changes, err := s.svc.Entities.PutDesktopLogin(r.Context(), principal(r), dryRun(r), "", nil)
	s.written(w, r, http.StatusOK, changes, err)
}

// getHomes answers the site's homes (404 when it has none); a pool's own is part of the
// pool.
func (s *Server) getHomes(w http.ResponseWriter, r *http.Request) {
	h := s.svc.Snapshot().Site.Homes
	if h == nil {
		s.httpError(w, model.NotFound("homes configuration", "site"))
		return
	}
	writeJSON(w, http.StatusOK, h)
}

func (s *Server) putHomes(w http.ResponseWriter, r *http.Request) {
	var in model.Homes
	if err := decodeJSON(r, &in); err != nil {
		s.httpError(w, err)
		return
	}
	changes, err := s.svc.Entities.PutHomes(r.Context(), principal(r), dryRun(r), "", &in)
	s.written(w, r, http.StatusOK, changes, err)
}

func (s *Server) deleteHomes(w http.ResponseWriter, r *http.Request) {
	changes, err := s.svc.Entities.PutHomes(r.Context(), principal(r), dryRun(r), "", nil)
	s.written(w, r, http.StatusOK, changes, err)
}

// ModeAt is the answer of GET /api/v1/mode-at.
type ModeAt struct {
	Host     string     `json:"host"`
	Time     time.Time  `json:"time"`
	Mode     string     `json:"mode"`
	Kind     string     `json:"kind"`
	Level    string     `json:"level"`
	Rule     string     `json:"rule"`
	Next     *time.Time `json:"next,omitempty"`
	NextMode string     `json:"nextMode,omitempty"`
}

func (s *Server) modeAt(w http.ResponseWriter, r *http.Request) {
	snap := s.svc.Snapshot()
	host := r.URL.Query().Get("host")
	t := s.opt.Now()
	if v := r.URL.Query().Get("time"); v != "" {
		var err error
		if t, err = ParseTime(v, snap.Engine.Location()); err != nil {
			s.httpError(w, err)
			return
		}
	}
	h := snap.Host(host)
	if h == nil {
		s.httpError(w, model.NotFound("host", host))
		return
	}
	m, d := snap.Resolver.ModeAt(h, t)
	loc := snap.Engine.Location()
	out := ModeAt{Host: host, Time: t.In(loc), Mode: d.Mode, Level: d.Level.String(), Rule: d.Rule, NextMode: d.NextMode}
	if m != nil {
		out.Kind = string(m.Kind)
	}
	if !d.Next.IsZero() {
		n := d.Next.In(loc)
		out.Next = &n
	}
	writeJSON(w, http.StatusOK, out)
}

// ParseTime accepts RFC 3339, or "YYYY-MM-DD HH:MM" / "YYYY-MM-DDTHH:MM" in the site's zone.
//
// A local time the clocks skip (spring forward, 02:30 on the night summer time starts in
// Europe) names no instant and is refused rather than moved by an hour, which is what
// the time package would do. A local time the clocks pass twice (autumn) is taken at
// its first occurrence, the earlier instant, which is how people read "02:30" on that
// night; the second one is given with its offset in RFC 3339.
func ParseTime(v string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	for _, f := range []string{"2006-01-02 15:04", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02T15:04:05"} {
		wall, err := time.ParseInLocation(f, v, time.UTC)
		if err != nil {
			continue
		}
		if t, ok := localInstant(wall, loc); ok {
			return t, nil
		}
		return time.Time{}, model.Invalid("time %q does not exist in time zone %s: the clocks skip it (daylight saving time starts); give a time outside the gap or an RFC 3339 time with its offset", v, loc)
	}
	return time.Time{}, model.Invalid("invalid time %q: use RFC 3339 (2026-12-01T10:00:00+01:00) or 'YYYY-MM-DD HH:MM' in the site's time zone", v)
}

// localInstant finds the earliest instant whose wall clock in loc is wall's (wall is
// given in UTC, its fields are what counts); ok is false when loc skips that wall time.
// The candidates are wall shifted by each UTC offset loc has within a day of it: zone
// transitions are months apart, so that covers both sides of any gap or fold.
func localInstant(wall time.Time, loc *time.Location) (time.Time, bool) {
	var best time.Time
	for _, d := range []time.Duration{-24 * time.Hour, 0, 24 * time.Hour} {
		_, off := wall.Add(d).In(loc).Zone()
		t := wall.Add(-time.Duration(off) * time.Second).In(loc)
		if sameWall(t, wall) && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	return best, !best.IsZero()
}

func sameWall(t, wall time.Time) bool {
	y, mo, d := t.Date()
	wy, wmo, wd := wall.Date()
	return y == wy && mo == wmo && d == wd && t.Hour() == wall.Hour() && t.Minute() == wall.Minute() && t.Second() == wall.Second()
}
