package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// heartbeats keeps the last heartbeat document and posts it to the site manager: every
// Options.Heartbeat (Loop) and when the loop's state changes (Send). The loop composes
// the document (Agent.updateHeartbeat) from what each part of the agent knows; this type
// only stamps, keeps and delivers it.
type heartbeats struct {
	site SiteManager
	log  *slog.Logger

	mu  sync.Mutex
	doc wire.Heartbeat
	// instance and seq order this process's heartbeats for the site manager
	// (wire.Heartbeat.Instance, Seq): goroutines post them concurrently, and the clock
	// that stamps them can be stepped by hours.
	instance string
	seq      uint64 // guarded by mu

	// The boot's duration (BootSeconds), owned by Run's goroutine.
	stateDir, uptime string
	bootSecond       float64
}

func newHeartbeats(site SiteManager, log *slog.Logger, stateDir, uptime string) (*heartbeats, error) {
	instance, err := newInstanceID()
	if err != nil {
		return nil, err
	}
	return &heartbeats{site: site, log: log, instance: instance, stateDir: stateDir, uptime: uptime}, nil
}

// newInstanceID is a random id for this agent process's heartbeats: unique across
// restarts without any state, which a stateless PC does not keep.
func newInstanceID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("agent: instance id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Record stamps hb with this process's instance and the next sequence number and makes
// it the document the next post sends.
func (h *heartbeats) Record(hb wire.Heartbeat) {
	h.mu.Lock()
	h.seq++
	hb.Instance, hb.Seq = h.instance, h.seq
	h.doc = hb
	h.mu.Unlock()
}

// Last is the most recent document (safe from any goroutine).
func (h *heartbeats) Last() wire.Heartbeat {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.doc
}

// Send posts the last document (none before the first configuration named the host).
func (h *heartbeats) Send(ctx context.Context) {
	hb := h.Last()
	if hb.Host == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := h.site.Heartbeat(ctx, hb); err != nil {
		h.log.Debug("heartbeat", "err", err)
	}
}

// Loop posts the state every interval. The document is refreshed by the loop's
// goroutine (Agent.updateHeartbeat), so that it reads consistent state.
func (h *heartbeats) Loop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Send(ctx)
		}
	}
}

// BootSeconds is how long this boot took to reach the agent's first configuration: the
// kernel's uptime then, kept in the state directory (tmpfs: one value per boot) so that
// a restarted agent reports the boot's, not its own start.
func (h *heartbeats) BootSeconds() float64 {
	if h.bootSecond > 0 {
		return h.bootSecond
	}
	f := filepath.Join(h.stateDir, "boot-seconds")
	if b, err := os.ReadFile(f); err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && v > 0 {
			h.bootSecond = v
			return v
		}
	}
	b, err := os.ReadFile(h.uptime)
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || v <= 0 {
		return 0
	}
	h.bootSecond = v
	_ = atomicfile.WriteFile(f, []byte(strconv.FormatFloat(v, 'f', 1, 64)+"\n"), 0o644)
	return v
}
