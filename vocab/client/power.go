package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Power asks the site manager to reboot, power off or wake the hosts of a hostlist
// expression (POST /api/v1/power).
func (c *Client) Power(ctx context.Context, req wire.HostPowerRequest) (*wire.HostPowerResponse, error) {
	var out wire.HostPowerResponse
	if err := c.sendCtx(ctx, http.MethodPost, "/api/v1/power", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PowerCommands lists the power commands, newest first (host != "": of that host).
func (c *Client) PowerCommands(ctx context.Context, host string) ([]wire.PowerRecord, error) {
	q := url.Values{}
	if host != "" {
		q.Set("host", host)
	}
	var out []wire.PowerRecord
	if err := c.getCtx(ctx, "/api/v1/power", q, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Audit lists the audit trail, oldest first (host, since: filters; "": none). since is
// RFC 3339 or "YYYY-MM-DD HH:MM" in the site's zone, which the server reads.
func (c *Client) Audit(ctx context.Context, host, since string) ([]wire.AuditEntry, error) {
	q := url.Values{}
	if host != "" {
		q.Set("host", host)
	}
	if since != "" {
		q.Set("since", since)
	}
	var out []wire.AuditEntry
	if err := c.getCtx(ctx, "/api/v1/audit", q, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Wakes is what boot server name is to send (GET /api/v1/bootservers/{name}/wakes).
func (c *Client) Wakes(ctx context.Context, name string) (*wire.Wakes, error) {
	var out wire.Wakes
	if err := c.getCtx(ctx, "/api/v1/bootservers/"+url.PathEscape(name)+"/wakes", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WakesSent reports which wakes boot server name sent (its own account only).
func (c *Client) WakesSent(ctx context.Context, name string, rep wire.WakesSent) (*wire.Wakes, error) {
	var out wire.Wakes
	if err := c.sendCtx(ctx, http.MethodPost, "/api/v1/bootservers/"+url.PathEscape(name)+"/wakes", rep, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
