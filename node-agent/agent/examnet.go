package agent

// The exam's network: while the configuration says exam, the PC reaches what the site
// manager's ExamNetwork lists (and its own resolvers, loopback, DHCP) and nothing else;
// when it no longer does, the table is deleted. Rules are node-agent/examfw's.

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/overtime-hpc/overtime/node-agent/examfw"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// examNetwork owns whether the exam's nftables table is loaded, and from which document.
// Owned by the decision loop (apply).
type examNetwork struct {
	fw         examfw.Firewall // nil: the network is never limited
	lookup     examfw.Lookup
	resolvConf []string
	log        *slog.Logger

	loaded string // the ExamNetwork (JSON) whose ruleset is in force; "" none
	absent bool   // the table is known to be gone (removed by this agent)
	warned bool   // said once that the site manager sends no exam network
}

// Configure brings the table in line with configuration c: loaded (names resolved now,
// at the exam's start or when its list changes) while c is an exam with a network,
// deleted otherwise. A restarted agent does not know what an earlier one loaded, so the
// first configuration outside an exam deletes the table too (nothing to delete is no
// error). A failure is logged and tried again with the next configuration.
func (e *examNetwork) Configure(ctx context.Context, c *wire.AgentConfig) {
	if e.fw == nil {
		return
	}
	if c.Exam && c.ExamNetwork == nil {
		if !e.warned {
			e.log.Warn("exam: the site manager sends no exam network (an older version); the network is not limited")
			e.warned = true
		}
	}
	if !c.Exam || c.ExamNetwork == nil {
		if e.absent {
			return
		}
		if err := e.fw.Remove(ctx); err != nil {
			e.log.Error("exam network: deleting the table", "table", "inet "+examfw.Table, "err", err)
			return
		}
		if e.loaded != "" {
			e.log.Info("exam over: network no longer limited", "table", "inet "+examfw.Table)
		}
		e.loaded, e.absent = "", true
		return
	}
	b, _ := json.Marshal(c.ExamNetwork)
	if string(b) == e.loaded {
		return
	}
	targets, skipped := examfw.Resolve(ctx, e.lookup, c.ExamNetwork)
	for _, s := range skipped {
		// Left out, never widened: the PC reaches less, not more.
		e.log.Warn("exam network: entry left out", "endpoint", s.Endpoint, "for", s.For, "err", s.Err)
	}
	targets = append(targets, examfw.Resolvers(e.resolvConf...)...)
	if err := e.fw.Apply(ctx, examfw.Render(targets)); err != nil {
		e.log.Error("exam network: loading the ruleset", "table", "inet "+examfw.Table, "err", err)
		return
	}
	e.loaded, e.absent = string(b), false
	e.log.Info("exam: network limited", "table", "inet "+examfw.Table, "rules", len(targets), "leftOut", len(skipped))
}
