package bootserver

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/wol"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Wake-on-LAN from the boot server (docs/operations.md, "Power: reboot, wake, power
// off"): the site manager says which PCs the boot server's hosts need woken (wake
// commands and the wakes its schedule makes due, GET /api/v1/bootservers/NAME/wakes);
// the boot server sends the magic packets from its own network, which is the PCs', and
// reports them sent (POST, its own account). The site manager itself is often in another
// network, where a broadcast never reaches the PCs.

// wakeResend is how long a wake this process sent is not sent again while the site
// manager has not taken the report (an account without the boot-server role, an outage).
const wakeResend = 10 * time.Minute

// wakeState remembers what this process sent, by ID.
type wakeState struct {
	sent    map[string]time.Time
	failing string
}

// WakeOnce fetches the wakes due, sends their packets and reports what was sent. It
// returns the IDs it sent in this round.
func (c *Config) WakeOnce(ctx context.Context) ([]string, error) {
	if c.wakes == nil {
		c.wakes = &wakeState{sent: map[string]time.Time{}}
	}
	wk, err := c.Client.Wakes(ctx, c.Name)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for id, at := range c.wakes.sent {
		if now.Sub(at) > wakeResend {
			delete(c.wakes.sent, id)
		}
	}
	rep := wire.WakesSent{Sent: []string{}, Failed: map[string]string{}}
	var round []string
	for _, w := range wk.Wakes {
		if _, done := c.wakes.sent[w.ID]; done {
			rep.Sent = append(rep.Sent, w.ID) // report again, do not send again
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := wol.SendWith(sctx, c.dialer(), w.Addr, w.MAC)
		cancel()
		if err != nil {
			rep.Failed[w.ID] = err.Error()
			c.Log.Warn("wake-on-lan failed", "host", w.Host, "mac", w.MAC, "addr", w.Addr, "err", err)
			continue
		}
		c.wakes.sent[w.ID] = now
		rep.Sent = append(rep.Sent, w.ID)
		round = append(round, w.ID)
		c.Log.Info("wake-on-lan sent", "host", w.Host, "mac", w.MAC, "addr", w.Addr, "by", w.By, "reason", w.Reason)
	}
	if len(rep.Sent) == 0 && len(rep.Failed) == 0 {
		return round, nil
	}
	if _, err := c.Client.WakesSent(ctx, c.Name, rep); err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == 403 {
			return round, errors.New("the site manager refused the wake report: run the boot server with its own account (a boot-server role naming " + c.Name + "): " + err.Error())
		}
		return round, err
	}
	// Taken. The IDs stay remembered until wakeResend: a replica that has not seen the
	// report yet may still hand them out, and then they are reported, not sent, again.
	return round, nil
}

func (c *Config) dialer() wol.Dialer {
	if c.Dial != nil {
		return c.Dial
	}
	d := net.Dialer{}
	return d.DialContext
}

// wakeLoop runs WakeOnce every Refresh until ctx ends; a failure is logged when it
// starts and when it ends, not at every round.
func (c *Config) wakeLoop(ctx context.Context) {
	t := time.NewTicker(c.Refresh)
	defer t.Stop()
	failing := ""
	for {
		_, err := c.WakeOnce(ctx)
		switch {
		case err != nil && err.Error() != failing && ctx.Err() == nil:
			c.Log.Warn("wakes: " + err.Error())
			failing = err.Error()
		case err == nil && failing != "":
			c.Log.Info("wakes work again")
			failing = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
