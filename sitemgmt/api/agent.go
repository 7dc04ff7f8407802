package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/hostcred"
	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/render"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/sitemgmt/wire"
)

// The node agent's side of the API (docs/agent-api.md):
//
//	POST   /api/v1/hosts/{name}/credential  issue a host's bearer token (site or pool admin)
//	DELETE /api/v1/hosts/{name}/credential  revoke it
//	GET    /api/v1/agent/config             the agent's configuration, resolved now
//	POST   /api/v1/agent/heartbeat          the agent's state (kept in memory)
//	GET    /api/v1/agent/status[/{host}]    last heartbeats, with a stale flag
//
// A node agent authenticates with "Authorization: Bearer ot1.<host>.<secret>"; the
// directory holds only the token's SHA-256 (sitemgmt/hostcred). Such a host principal may
// fetch its own configuration and post its own heartbeats, nothing else.

func (s *Server) agentRoutes() {
	m := s.mux
	m.HandleFunc("POST /api/v1/hosts/{name}/credential", s.read(s.createCredential))
	m.HandleFunc("DELETE /api/v1/hosts/{name}/credential", s.read(s.revokeCredential))
	m.HandleFunc("GET /api/v1/agent/config", s.agent(s.agentConfig))
	m.HandleFunc("POST /api/v1/agent/heartbeat", s.agent(s.heartbeat))
	m.HandleFunc("GET /api/v1/agent/status", s.read(s.agentStatusList))
	m.HandleFunc("GET /api/v1/agent/status/{host}", s.read(s.agentStatusOne))
}

// agent wraps the handlers a node agent calls: users and hosts get through; the handler
// decides with authz.Principal.AgentHost which host the request may concern.
func (s *Server) agent(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, p)))
	}
}

// ---- host authentication ----

// bearerToken returns the token of an "Authorization: Bearer ..." header; ok is false
// when the request uses another scheme (or none).
func bearerToken(r *http.Request) (string, bool) {
	v := r.Header.Get("Authorization")
	scheme, tok, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

func unauthorizedBearer(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="overtime"`)
	writeError(w, http.StatusUnauthorized, msg)
}

// hostAuthCache remembers, per host, the hash of the token that last proved to be valid,
// for AuthCacheTTL, so that a heartbeat every 30 s per host does not read the directory
// each time. Issuing or revoking a credential through this server forgets the host at
// once; another server instance notices a revocation within the TTL.
type hostAuthCache struct {
	mu  sync.Mutex
	ttl time.Duration
	ok  map[string]authEntry
}

func (c *hostAuthCache) init(ttl time.Duration) {
	c.ttl = ttl
	c.ok = map[string]authEntry{}
}

func (c *hostAuthCache) hit(host, token string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.ok[host]
	if !ok || now.After(e.expires) {
		return false
	}
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1
}

func (c *hostAuthCache) store(host, token string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok[host] = authEntry{sum: sha256.Sum256([]byte(token)), expires: now.Add(c.ttl)}
}

func (c *hostAuthCache) forget(host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ok, host)
}

// isNotFound reports whether the store said "no such entry" (ldapstore.ErrUnknownHost).
func isNotFound(err error) bool {
	var nf interface{ NotFound() bool }
	return errors.As(err, &nf) && nf.NotFound()
}

// authenticateHost checks a host's bearer token: its form, the host in the current site,
// and the token's hash against the one in the host's directory entry, in constant time.
// Every failure is a 401 that says no more than what was wrong with the form; a directory
// that cannot be asked is a 503, so that an agent does not take it for a revocation.
func (s *Server) authenticateHost(w http.ResponseWriter, r *http.Request, token string) (authz.Principal, bool) {
	host, err := hostcred.Parse(token)
	if err != nil {
		unauthorizedBearer(w, "invalid host token: expected ot1.<hostname>.<secret> (see `overtime host credential`)")
		return authz.Principal{}, false
	}
	// Hosts not in the site are refused without asking the directory (and a deleted
	// host at once, whatever the cache holds).
	if s.svc.Snapshot().Site.Host(host) == nil {
		unauthorizedBearer(w, "invalid host credential")
		return authz.Principal{}, false
	}
	now := time.Now()
	if s.hostAuth.hit(host, token, now) {
		return authz.ForHost(host), true
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	stored, err := s.svc.Backend().HostCredential(ctx, host)
	if err != nil && !isNotFound(err) {
		s.opt.Log.Error("reading a host credential failed", "host", host, "err", err)
		writeError(w, http.StatusServiceUnavailable, "directory unavailable; try again")
		return authz.Principal{}, false
	}
	if err != nil || !hostcred.Verify(token, stored) {
		unauthorizedBearer(w, "invalid host credential")
		return authz.Principal{}, false
	}
	s.hostAuth.store(host, token, now)
	return authz.ForHost(host), true
}

// ---- credentials ----

func (s *Server) credentialTarget(w http.ResponseWriter, r *http.Request) (*model.Host, bool) {
	p := principal(r)
	name := r.PathValue("name")
	h := s.svc.Snapshot().Site.Host(name)
	if h == nil {
		s.httpError(w, notFound{"host", name})
		return nil, false
	}
	if err := p.CheckHostCredential(h); err != nil {
		s.httpError(w, err)
		return nil, false
	}
	return h, true
}

// createCredential issues a new token for the host, replacing any previous one, and
// answers with it; the directory keeps only its hash, so this is the only time it is seen.
func (s *Server) createCredential(w http.ResponseWriter, r *http.Request) {
	h, ok := s.credentialTarget(w, r)
	if !ok {
		return
	}
	tok, err := hostcred.New(h.Name)
	if err != nil {
		s.httpError(w, err)
		return
	}
	if err := s.svc.Backend().SetHostCredential(r.Context(), h.Name, hostcred.Hash(tok)); err != nil {
		if isNotFound(err) {
			s.httpError(w, notFound{"host", h.Name})
			return
		}
		s.httpError(w, err)
		return
	}
	s.hostAuth.forget(h.Name)
	s.opt.Log.Info("host credential issued", "host", h.Name, "by", principal(r).UID)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, wire.HostCredential{Host: h.Name, Token: tok, Created: s.opt.Now().UTC().Truncate(time.Second)})
}

func (s *Server) revokeCredential(w http.ResponseWriter, r *http.Request) {
	h, ok := s.credentialTarget(w, r)
	if !ok {
		return
	}
	old, err := s.svc.Backend().HostCredential(r.Context(), h.Name)
	if err == nil {
		err = s.svc.Backend().SetHostCredential(r.Context(), h.Name, "")
	}
	if err != nil {
		if isNotFound(err) {
			s.httpError(w, notFound{"host", h.Name})
			return
		}
		s.httpError(w, err)
		return
	}
	s.hostAuth.forget(h.Name)
	s.opt.Log.Info("host credential revoked", "host", h.Name, "by", principal(r).UID, "had", old != "")
	writeJSON(w, http.StatusOK, wire.CredentialRevoked{Host: h.Name, Revoked: old != ""})
}

// ---- configuration ----

func (s *Server) agentConfig(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	host, err := p.AgentHost(r.URL.Query().Get("host"), false)
	if err != nil {
		s.httpError(w, err)
		return
	}
	if host == "" {
		s.httpError(w, model.Invalid("give the host: GET /api/v1/agent/config?host=NAME"))
		return
	}
	cfg, err := s.AgentConfigFor(s.svc.Snapshot(), host, s.opt.Now())
	if err != nil {
		s.httpError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, cfg)
}

// AgentConfigFor resolves a host's node agent configuration at now: the schedule
// evaluated (mode, kind, next change), the pool's effective policy, and the mode's guest
// with defaults filled, its image version resolved (pinned or newest) and located on the
// host's boot server (HTTP and NFS, the same paths boot scripts use).
func (s *Server) AgentConfigFor(snap *service.Snapshot, hostName string, now time.Time) (*wire.AgentConfig, error) {
	site := snap.Site
	h := site.Host(hostName)
	if h == nil {
		return nil, notFound{"host", hostName}
	}
	loc := snap.Engine.Location()
	d := snap.Engine.AtHost(h, now)
	m := site.Mode(d.Mode)
	if m == nil {
		return nil, fmt.Errorf("host %s: scheduled mode %q is not defined", h.Name, d.Mode)
	}
	cfg := &wire.AgentConfig{
		Host: h.Name, MAC: h.MAC, Pool: h.Pool,
		Generated: now.In(loc).Truncate(time.Second),
		Mode:      m.Name, Kind: m.Kind,
		NextMode: d.NextMode,
		Policy:   model.DefaultPolicy(),
	}
	if !d.Next.IsZero() {
		cfg.NextChange = d.Next.In(loc)
	}
	if p := site.Pool(h.Pool); p != nil && p.Policy != nil {
		cfg.Policy = p.Policy.Effective()
	}
	if m.Guest == nil {
		return cfg, nil
	}
	g := m.Guest.WithDefaults()
	im := site.Image(g.Image)
	if im == nil {
		return nil, fmt.Errorf("mode %s: guest image %q is not defined", m.Name, g.Image)
	}
	v := im.Version(g.Version)
	srv := s.agentServer(site, h)
	switch {
	case v == nil && g.Version != "":
		cfg.GuestUnavailable = fmt.Sprintf("image %s version %s is not published", im.Name, g.Version)
	case v == nil:
		cfg.GuestUnavailable = fmt.Sprintf("image %s has no published version", im.Name)
	case srv == nil:
		cfg.GuestUnavailable = "no boot server serves host " + h.Name + " (the site has none)"
	default:
		url, err := render.ImageURL(srv, v)
		if err != nil {
			cfg.GuestUnavailable = fmt.Sprintf("boot server %s: %v", srv.Name, err)
			break
		}
		resolved := *v
		resolved.Created = resolved.Created.UTC()
		cfg.Guest = &wire.AgentGuest{
			Guest: g, Name: "overtime-" + h.Name, ImageKind: im.Kind, Resolved: resolved,
			ImageURL: url, NFS: render.NFSImageDir(srv, v),
		}
	}
	return cfg, nil
}

// agentServer is the boot server whose HTTP and NFS exports a host's guest image comes
// from: the host's own (or its pool's), else the one this instance answers for, else the
// site's first; nil on a site without boot servers.
func (s *Server) agentServer(site *model.Site, h *model.Host) *model.BootServer {
	if b := site.BootServer(site.HostBootServer(h)); b != nil {
		return b
	}
	if b := site.BootServer(s.opt.BootServer); b != nil {
		return b
	}
	if len(site.BootServers) > 0 {
		return &site.BootServers[0]
	}
	return nil
}

// ---- heartbeats and status ----

// agentStatus holds the last heartbeat of every host, in memory: it is state, not
// configuration, and writing it to LDAP every 30 s per host would cost a directory write
// per heartbeat for nothing a restart could not rebuild within one interval.
//
// Every change bumps a revision and wakes the long polls of GET /api/v1/slurm/nodes, so
// that an owner's key press reaches Slurm in one round trip, not at the next poll.
type agentStatus struct {
	mu      sync.Mutex
	last    map[string]wire.HostStatus
	rev     uint64
	changed chan struct{} // closed and replaced at every change
	reports jobReports
}

// put stores a heartbeat unless it is older than the one already stored: the agent posts
// heartbeats from concurrent goroutines, and a late "run" must not overwrite "freeze".
func (a *agentStatus) put(st wire.HostStatus) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		a.last = map[string]wire.HostStatus{}
	}
	if prev, ok := a.last[st.Host]; ok && st.Time.Before(prev.Time) {
		return false
	}
	a.last[st.Host] = st
	a.bumpLocked()
	return true
}

func (a *agentStatus) bumpLocked() {
	a.rev++
	if a.changed != nil {
		close(a.changed)
	}
	a.changed = make(chan struct{})
}

// since returns the revision and a channel closed at the next change.
func (a *agentStatus) since() (uint64, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.changed == nil {
		a.changed = make(chan struct{})
	}
	return a.rev, a.changed
}

func (a *agentStatus) get(host string) (wire.HostStatus, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st, ok := a.last[host]
	return st, ok
}

func (a *agentStatus) all() []wire.HostStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]wire.HostStatus, 0, len(a.last))
	for _, st := range a.last {
		out = append(out, st)
	}
	return out
}

// maxHeartbeat bounds a heartbeat body; a real one is a few hundred bytes.
const maxHeartbeat = 16 << 10

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if !p.IsHost() {
		// Checked before reading the body: users never post heartbeats.
		_, err := p.AgentHost("", true)
		s.httpError(w, err)
		return
	}
	var hb wire.Heartbeat
	r.Body = http.MaxBytesReader(w, r.Body, maxHeartbeat)
	if err := decodeJSON(r, &hb); err != nil {
		s.httpError(w, err)
		return
	}
	host, err := p.AgentHost(hb.Host, true)
	if err != nil {
		s.httpError(w, err)
		return
	}
	hb.Host = host
	if err := hb.Validate(); err != nil {
		s.httpError(w, err)
		return
	}
	if s.svc.Snapshot().Site.Host(host) == nil {
		s.httpError(w, notFound{"host", host})
		return
	}
	st := wire.HostStatus{Heartbeat: hb, Received: s.opt.Now().UTC(), Remote: remoteIP(r)}
	if !s.status.put(st) {
		// Out of order (an older heartbeat overtaken by a newer one): accepted, not stored.
		st, _ = s.status.get(host)
	}
	writeJSON(w, http.StatusOK, st)
}

func remoteIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

func (s *Server) withStale(st wire.HostStatus, now time.Time) wire.AgentStatus {
	return wire.AgentStatus{HostStatus: st, Stale: now.Sub(st.Received) > wire.StaleAfter}
}

// agentStatusList lists the last heartbeat of every host of the current site that has
// posted one since this server started (?pool= narrows to one pool), by host name.
func (s *Server) agentStatusList(w http.ResponseWriter, r *http.Request) {
	site := s.svc.Snapshot().Site
	pool := r.URL.Query().Get("pool")
	now := s.opt.Now()
	out := []wire.AgentStatus{}
	for _, st := range s.status.all() {
		h := site.Host(st.Host)
		if h == nil || (pool != "" && h.Pool != pool) {
			continue
		}
		out = append(out, s.withStale(st, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) agentStatusOne(w http.ResponseWriter, r *http.Request) {
	host := r.PathValue("host")
	if s.svc.Snapshot().Site.Host(host) == nil {
		s.httpError(w, notFound{"host", host})
		return
	}
	st, ok := s.status.get(host)
	if !ok {
		writeError(w, http.StatusNotFound, "no heartbeat from host "+host+" since the site manager started")
		return
	}
	writeJSON(w, http.StatusOK, s.withStale(st, s.opt.Now()))
}
