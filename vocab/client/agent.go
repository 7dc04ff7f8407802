package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/capin"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Node agent endpoints (docs/agent-api.md). The agent's own calls, AgentConfig and
// GuestSecrets fetches the secrets of this host's compute guest (host credential).
func (c *Client) GuestSecrets(ctx context.Context) (*wire.GuestSecrets, error) {
	var s wire.GuestSecrets
	if err := c.getCtx(ctx, "/api/v1/agent/guest-secrets", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// SeatConfig fetches the files of this desktop's login stack (host credential).
func (c *Client) SeatConfig(ctx context.Context) (*wire.SeatConfig, error) {
	var s wire.SeatConfig
	if err := c.getCtx(ctx, "/api/v1/agent/seat", nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Heartbeat, need a client made with NewWithToken; the others are for people.

// Credential is a host credential file as `overtime host credential --out` writes it:
// the token on the first line and, when the site manager serves TLS with its CA at the
// end of its chain, a line "ca-pin sha256:HEX" (vocab/capin): the CA this PC trusts.
type Credential struct {
	Token string
	CAPin string // "" when the file pins no CA
}

// CAPinKey starts the credential file's CA pin line.
const CAPinKey = "ca-pin"

// File is the credential file's text.
func (c Credential) File() string {
	s := c.Token + "\n"
	if c.CAPin != "" {
		s += CAPinKey + " " + c.CAPin + "\n"
	}
	return s
}

// CredentialFromFile reads a host credential file. It refuses a file that other users
// may read: the token is the host's only proof of identity.
func CredentialFromFile(path string) (Credential, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Credential{}, fmt.Errorf("host credential: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return Credential{}, fmt.Errorf("host credential %s is readable by others (mode %#o): chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Credential{}, fmt.Errorf("host credential: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	c := Credential{Token: strings.TrimSpace(lines[0])}
	if c.Token == "" || strings.ContainsAny(c.Token, " \t\r") {
		return Credential{}, fmt.Errorf("host credential %s: expected the token on its first line", path)
	}
	for i, l := range lines[1:] {
		key, val, _ := strings.Cut(strings.TrimSpace(l), " ")
		if key != CAPinKey || c.CAPin != "" {
			return Credential{}, fmt.Errorf("host credential %s line %d: expected %q followed by the pin, once", path, i+2, CAPinKey)
		}
		if err := capin.Check(strings.TrimSpace(val)); err != nil {
			return Credential{}, fmt.Errorf("host credential %s line %d: %w", path, i+2, err)
		}
		c.CAPin = strings.TrimSpace(val)
	}
	return c, nil
}

// NewForAgent is the node agent's client of the site manager at serverURL, with its
// host credential: the one place that decides how an agent may reach its server. A
// credential that pins the site's CA is sent over TLS only, to a server whose
// certificate that CA signed (capin.TLSConfig); never over plain HTTP, whatever the
// URL (which the PC learnt from an unauthenticated boot chain) says. Without a pin,
// https uses the system's roots, and plain HTTP goes (a lab's: the token then crosses
// the network in clear, and the site manager hands no secret over it unless it was
// started with --insecure-http).
func NewForAgent(serverURL string, cred Credential) (*Client, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("site manager URL %q: expected https://HOST[:PORT]", serverURL)
	}
	c := NewWithToken(serverURL, cred.Token)
	switch {
	case u.Scheme == "https" && cred.CAPin != "":
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.TLSClientConfig = capin.TLSConfig(cred.CAPin, u.Hostname())
		c.HTTP = &http.Client{Transport: t, Timeout: 60 * time.Second}
	case u.Scheme == "https":
	case u.Scheme == "http" && cred.CAPin != "":
		return nil, fmt.Errorf("refusing plain HTTP to %s: this PC's credential pins the site's CA (%s), so it goes over https only", serverURL, cred.CAPin)
	case u.Scheme == "http":
	default:
		return nil, fmt.Errorf("site manager URL %q: expected https://HOST[:PORT]", serverURL)
	}
	return c, nil
}

func (c *Client) getCtx(ctx context.Context, path string, query url.Values, out any) error {
	data, err := c.doCtx(ctx, http.MethodGet, path, query, "", nil)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

func (c *Client) sendCtx(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	data, err := c.doCtx(ctx, method, path, nil, ct, body)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// AgentConfig fetches the configuration of the client's own host (token clients).
// With BootedMode set, the server also says whether the PC must restart to follow the
// schedule now (wire.AgentConfig.Reboot).
func (c *Client) AgentConfig(ctx context.Context) (*wire.AgentConfig, error) {
	var cfg wire.AgentConfig
	var q url.Values
	if c.BootedMode != "" {
		q = url.Values{"booted": {c.BootedMode}}
		if c.BootedExam {
			q.Set("exam", "1")
		}
	}
	if err := c.getCtx(ctx, "/api/v1/agent/config", q, &cfg); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// AgentConfigFor fetches the configuration the site manager would give host's agent now
// (users, for debugging; a token client may name only its own host).
func (c *Client) AgentConfigFor(ctx context.Context, host string) (*wire.AgentConfig, error) {
	var cfg wire.AgentConfig
	if err := c.getCtx(ctx, "/api/v1/agent/config", url.Values{"host": {host}}, &cfg); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Heartbeat posts the agent's state (token clients). An empty hb.Host is filled in by the
// server with the token's host.
func (c *Client) Heartbeat(ctx context.Context, hb wire.Heartbeat) error {
	return c.sendCtx(ctx, http.MethodPost, "/api/v1/agent/heartbeat", hb, nil)
}

// AgentStatus lists the last heartbeat of every host that sent one (pool "" = all).
func (c *Client) AgentStatus(ctx context.Context, pool string) ([]wire.AgentStatus, error) {
	var q url.Values
	if pool != "" {
		q = url.Values{"pool": {pool}}
	}
	var out []wire.AgentStatus
	if err := c.getCtx(ctx, "/api/v1/agent/status", q, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// AgentStatusOf is one host's last heartbeat (an APIError with Status 404 when it has
// sent none yet).
func (c *Client) AgentStatusOf(ctx context.Context, host string) (*wire.AgentStatus, error) {
	var st wire.AgentStatus
	if err := c.getCtx(ctx, "/api/v1/agent/status/"+url.PathEscape(host), nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// CreateHostCredential issues a new bearer token for host, replacing its previous one.
// The token is in the answer only: the site manager keeps just its hash.
func (c *Client) CreateHostCredential(ctx context.Context, host string) (*wire.HostCredential, error) {
	var cred wire.HostCredential
	if err := c.sendCtx(ctx, http.MethodPost, "/api/v1/hosts/"+url.PathEscape(host)+"/credential", nil, &cred); err != nil {
		return nil, err
	}
	return &cred, nil
}

// RevokeHostCredential removes host's credential; revoked is false when it had none.
func (c *Client) RevokeHostCredential(ctx context.Context, host string) (revoked bool, err error) {
	var out struct {
		Host    string `json:"host"`
		Revoked bool   `json:"revoked"`
	}
	if err := c.sendCtx(ctx, http.MethodDelete, "/api/v1/hosts/"+url.PathEscape(host)+"/credential", nil, &out); err != nil {
		return false, err
	}
	return out.Revoked, nil
}

// PostJobReport sends a job's interference report (node agent: host token).
func (c *Client) PostJobReport(ctx context.Context, r wire.JobReport) (*wire.JobReport, error) {
	var out wire.JobReport
	if err := c.sendCtx(ctx, http.MethodPost, "/api/v1/agent/jobs", r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// JobReport fetches host's interference report of job (JobReportsOf: every host's).
func (c *Client) JobReport(ctx context.Context, job, host string) (*wire.JobReport, error) {
	if host == "" {
		return nil, fmt.Errorf("job %s: which host's report? (name one, or read every host's with JobReportsOf)", job)
	}
	var out wire.JobReport
	if err := c.getCtx(ctx, "/api/v1/jobs/"+url.PathEscape(job), url.Values{"host": {host}}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// JobReportsOf fetches every host's interference report of job, sorted by host: a job
// requeued onto another host has one from each, and no host's report replaces another's.
// A site manager from before these documents answers one report (the latest of any host);
// it comes back as the only one.
func (c *Client) JobReportsOf(ctx context.Context, job string) (*wire.JobReports, error) {
	var raw map[string]json.RawMessage
	data, err := c.doCtx(ctx, http.MethodGet, "/api/v1/jobs/"+url.PathEscape(job), nil, "", nil)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	out := wire.JobReports{Job: job, Reports: []wire.JobReport{}}
	if _, ok := raw["reports"]; !ok {
		var one wire.JobReport
		if err := json.Unmarshal(data, &one); err != nil {
			return nil, err
		}
		out.Reports = append(out.Reports, one)
		return &out, nil
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// JobReports lists recent reports (host "" = all).
func (c *Client) JobReports(ctx context.Context, host string) ([]wire.JobReport, error) {
	var q url.Values
	if host != "" {
		q = url.Values{"host": {host}}
	}
	var out []wire.JobReport
	if err := c.getCtx(ctx, "/api/v1/jobs", q, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// SlurmNodes fetches the desired Slurm node states; with wait > 0 it long-polls until the
// revision passes since.
func (c *Client) SlurmNodes(ctx context.Context, since uint64, wait time.Duration) (*wire.SlurmFeed, error) {
	q := url.Values{"since": {strconv.FormatUint(since, 10)}}
	if wait > 0 {
		q.Set("wait", strconv.FormatFloat(wait.Seconds(), 'f', -1, 64))
	}
	var out wire.SlurmFeed
	if err := c.getCtx(ctx, "/api/v1/slurm/nodes", q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SlurmReservations fetches every host's coming windows without a compute guest within
// horizon (0: the server's default, a week).
func (c *Client) SlurmReservations(ctx context.Context, horizon time.Duration) (*wire.SlurmReservations, error) {
	q := url.Values{}
	if horizon > 0 {
		q.Set("horizon", horizon.String())
	}
	var out wire.SlurmReservations
	if err := c.getCtx(ctx, "/api/v1/slurm/reservations", q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SlurmResume asks the site manager to make hosts available to Slurm (power saving's
// ResumeProgram); SlurmSuspend gives them back to their schedule (SuspendProgram).
func (c *Client) SlurmResume(ctx context.Context, req wire.PowerRequest) (*wire.PowerResponse, error) {
	return c.slurmPower(ctx, "/api/v1/slurm/resume", req)
}

func (c *Client) SlurmSuspend(ctx context.Context, req wire.PowerRequest) (*wire.PowerResponse, error) {
	return c.slurmPower(ctx, "/api/v1/slurm/suspend", req)
}

func (c *Client) slurmPower(ctx context.Context, path string, req wire.PowerRequest) (*wire.PowerResponse, error) {
	var out wire.PowerResponse
	if err := c.sendCtx(ctx, http.MethodPost, path, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
