package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/hostcred"
	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/seatconf"
	"github.com/overtime-hpc/overtime/sitemgmt/service"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
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
	m.HandleFunc("GET /api/v1/agent/guest-secrets", s.agent(s.guestSecrets))
	m.HandleFunc("GET /api/v1/agent/seat", s.agent(s.seatConfig))
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
		// Bodies here are small documents: at most maxAgentBody each, and a host (or
		// user) may have only perHostBodies in flight, however many connections it opens.
		release, ok := s.admitBody(w, r, p.UID, maxAgentBody, perHostBodies)
		if !ok {
			return
		}
		defer release()
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

// hostAuthCache remembers, per host, the hash of the token that last proved to be valid
// and when the directory last confirmed it. For AuthCacheTTL after that it is accepted
// without asking the directory, so that a heartbeat every 30 s per host does not read the
// directory each time. After the TTL the directory is asked again; only if it cannot be
// asked is the token still accepted, up to outageGrace after its last verification, so
// that an outage of the directory does not stop heartbeats (and make Slurm requeue jobs).
// Issuing or revoking a credential through this server forgets the host at once, outage
// or not; another server instance notices a revocation within the TTL (or, during an
// outage, when the directory answers again).
type hostAuthCache struct {
	mu          sync.Mutex
	ttl         time.Duration
	outageGrace time.Duration
	ok          map[string]hostAuthEntry
}

type hostAuthEntry struct {
	sum      [32]byte  // SHA-256 of the token
	verified time.Time // when the directory last confirmed it
}

func (c *hostAuthCache) init(ttl, outageGrace time.Duration) {
	c.ttl, c.outageGrace = ttl, outageGrace
	c.ok = map[string]hostAuthEntry{}
}

// verifiedAt is when the directory last confirmed token for host; ok is false when the
// cache holds another token for the host, or none.
func (c *hostAuthCache) verifiedAt(host, token string) (at time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, found := c.ok[host]
	if !found {
		return time.Time{}, false
	}
	sum := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(sum[:], e.sum[:]) != 1 {
		return time.Time{}, false
	}
	return e.verified, true
}

func (c *hostAuthCache) store(host, token string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok[host] = hostAuthEntry{sum: sha256.Sum256([]byte(token)), verified: now}
}

func (c *hostAuthCache) forget(host string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.ok, host)
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
	if s.svc.Snapshot().Host(host) == nil {
		unauthorizedBearer(w, "invalid host credential")
		return authz.Principal{}, false
	}
	now := time.Now()
	verified, cached := s.hostAuth.verifiedAt(host, token)
	if cached && now.Sub(verified) < s.hostAuth.ttl {
		return authz.ForHost(host), true
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	stored, err := s.svc.Accounts.HostCredential(ctx, host)
	if err != nil && !service.IsNotFound(err) {
		if cached && now.Sub(verified) < s.hostAuth.outageGrace {
			// Verified before, and not revoked through this server since: keep the
			// agent's heartbeats flowing; the directory is asked again next time. Debug:
			// every heartbeat of every host would repeat it; /healthz reports the outage.
			s.opt.Log.Debug("directory unavailable; accepting a host token verified before", "host", host, "verified", verified, "err", err)
			return authz.ForHost(host), true
		}
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

// createCredential issues a new token for the host, replacing any previous one, and
// answers with it; the directory keeps only its hash, so this is the only time it is seen.
func (s *Server) createCredential(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	tok, err := s.svc.Accounts.IssueHostCredential(r.Context(), principal(r), name)
	if err != nil {
		s.httpError(w, err)
		return
	}
	s.hostAuth.forget(name)
	s.opt.Log.Info("host credential issued", "host", name, "by", principal(r).UID)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, wire.HostCredential{Host: name, Token: tok, CAPin: s.opt.CAPin, Created: s.opt.Now().UTC().Truncate(time.Second)})
}

func (s *Server) revokeCredential(w http.ResponseWriter, r *http.Request) {
	p, name := principal(r), r.PathValue("name")
	if _, err := s.svc.Accounts.MayManageHostCredential(p, name); err != nil {
		s.httpError(w, err)
		return
	}
	// Forgotten first, so that the token stops being accepted here at once even when the
	// directory cannot be written (an outage: see hostAuthCache).
	s.hostAuth.forget(name)
	had, err := s.svc.Accounts.RevokeHostCredential(r.Context(), p, name)
	if err != nil {
		s.httpError(w, err)
		return
	}
	s.hostAuth.forget(name)
	s.opt.Log.Info("host credential revoked", "host", name, "by", p.UID, "had", had)
	writeJSON(w, http.StatusOK, wire.CredentialRevoked{Host: name, Revoked: had})
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
	// What the PC booted (its agent reads the kernel command line): the configuration
	// then says whether the PC must restart to follow the schedule now.
	var booted resolve.Running
	if m := r.URL.Query().Get("booted"); m != "" {
		if err := model.ValidName("mode", m); err != nil {
			s.httpError(w, model.Invalid("booted: %v", err))
			return
		}
		booted = resolve.Running{Mode: m, Exam: r.URL.Query().Get("exam") == "1"}
	}
	cfg, err := s.svc.Hosts.AgentConfig(host, s.agentRequest(booted, p.IsHost()))
	if err != nil {
		s.serviceError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, cfg)
}

// agentRequest is the context of an agent configuration asked of this server now;
// byAgent: the host's own agent asks (service.AgentRequest.ByAgent).
func (s *Server) agentRequest(booted resolve.Running, byAgent bool) service.AgentRequest {
	return service.AgentRequest{At: s.opt.Now(), BootServer: s.opt.BootServer, Booted: booted, ByAgent: byAgent}
}

// ---- guest secrets ----

// guestSecrets hands a host's agent what its compute guest needs to join the cluster and
// must not be baked into an image: the munge key (Options.MungeKeyFile, read at each
// request so that a rotated key is handed out at once). Only to the host itself, and only
// while its schedule gives it a compute guest.
// secretChannel says whether a secret may go to r's client, and answers 403 when not:
// over TLS (this server's own, or a trusted proxy's) always, over plain HTTP only in a
// lab that chose it (Options.InsecureHTTP). Checked after the principal, so that the
// answer says nothing to whoever may not have the secret anyway.
func (s *Server) secretChannel(w http.ResponseWriter, r *http.Request, what string) bool {
	if s.opt.InsecureHTTP || s.opt.TrustedProxies.TLS(r) {
		return true
	}
	writeError(w, http.StatusForbidden, what+" go to agents over TLS only, and this request came over plain HTTP: serve the API with --tls-cert (docs/node-agent.md \"The channel\"), or, in a lab, start overtime serve with --insecure-http")
	return false
}

func (s *Server) guestSecrets(w http.ResponseWriter, r *http.Request) {
	host, err := principal(r).CheckGuestSecrets()
	if err != nil {
		s.httpError(w, err)
		return
	}
	if s.opt.MungeKeyFile == "" {
		writeError(w, http.StatusNotFound, "this site manager hands out no guest secrets: start overtime serve with --munge-key FILE")
		return
	}
	if !s.secretChannel(w, r, "guest secrets (the cluster's munge key)") {
		return
	}
	if _, err := s.svc.Hosts.GuestSecretsFor(host, s.agentRequest(resolve.Running{}, false)); err != nil {
		var none *service.NoGuestSecrets
		if errors.As(err, &none) {
			writeError(w, http.StatusForbidden, err.Error())
			return
		}
		s.serviceError(w, err)
		return
	}
	key, err := os.ReadFile(s.opt.MungeKeyFile)
	if err != nil || len(key) == 0 {
		s.opt.Log.Error("munge key unreadable", "file", s.opt.MungeKeyFile, "err", err)
		writeError(w, http.StatusInternalServerError, "the site manager cannot read its munge key")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, wire.GuestSecrets{MungeKey: key})
}

// seatConfig hands a desktop the files of its login stack (sssd.conf, krb5.conf, the
// directory's CA, its keytab), its printing and the sessions its greeter offers now,
// before its display manager starts: only to the host itself, since they carry the
// directory's bind password and the PC's own key.
func (s *Server) seatConfig(w http.ResponseWriter, r *http.Request) {
	host, err := principal(r).CheckSeatConfig()
	if err != nil {
		s.httpError(w, err)
		return
	}
	out, err := s.svc.Hosts.SeatConfig(host, s.agentRequest(resolve.Running{}, false), seatconf.SecretDir(s.opt.DesktopSecrets))
	if err != nil {
		s.serviceError(w, err)
		return
	}
	// A configuration without a secret (an anonymous directory, no keytab) may go over
	// plain HTTP; one with the bind password or the PC's keytab may not.
	if out.Secret && !s.secretChannel(w, r, "desktop login secrets (the directory's bind password, the PC's keytab)") {
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// ---- heartbeats and status ----

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if !p.IsHost() {
		// Checked before reading the body: users never post heartbeats.
		_, err := p.AgentHost("", true)
		s.httpError(w, err)
		return
	}
	var hb wire.Heartbeat
	r.Body = http.MaxBytesReader(w, r.Body, maxAgentBody)
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
	st, err := s.svc.Agents.PutHeartbeat(hb, s.opt.Now(), s.remoteIP(r))
	if err != nil {
		s.serviceError(w, err)
		return
	}
	s.metrics.heartbeat()
	writeJSON(w, http.StatusOK, st)
}

// remoteIP is the address a heartbeat came from, as the login throttle sees a client:
// the peer's, or the one a trusted reverse proxy names (trustproxy).
func (s *Server) remoteIP(r *http.Request) string {
	if a := s.opt.TrustedProxies.Client(r); a.IsValid() {
		return a.String()
	}
	return r.RemoteAddr
}

// agentStatusList lists the last heartbeat of every host of the current site that has
// posted one since this server started (?pool= narrows to one pool), by host name.
func (s *Server) agentStatusList(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.svc.Agents.Statuses(r.URL.Query().Get("pool"), s.opt.Now()))
}

func (s *Server) agentStatusOne(w http.ResponseWriter, r *http.Request) {
	host := r.PathValue("host")
	st, ok, err := s.svc.Agents.Status(host, s.opt.Now())
	if err != nil {
		s.serviceError(w, err)
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "no heartbeat from host "+host+" yet")
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// serviceError answers an error of the service or the resolver: "no such entity" is a
// 404 with its own message, everything else as httpError maps it.
func (s *Server) serviceError(w http.ResponseWriter, err error) {
	if service.IsNotFound(err) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	s.httpError(w, err)
}
