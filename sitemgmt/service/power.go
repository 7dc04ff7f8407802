package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/powersave"
	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/wake"
	"github.com/overtime-hpc/overtime/sitemgmt/wol"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Power is the queue of power commands and the wakes sent.
type Power struct {
	s     *Service
	state powerState // the commands, kept like heartbeats (state.go)
}

// Power commands (overtime host reboot|poweroff|wake, Slurm's SuspendProgram, scheduled
// wakes) are runtime state kept like heartbeats (state.go): in memory, and in the
// directory's ou=state when the backend is a StateStore, so that every replica hands a
// pending command to the agent that asks it, and a restart loses no command. Each
// request and each end of a command is recorded in the audit trail (audit.go).
//
//   - power/ID: one document per command (wire.PowerRecord). A reboot or power-off is
//     handed to the host's agent in its configuration while pending; it ends when the
//     agent's heartbeat reports the ID done or refused, or when another agent instance
//     started after it (the PC restarted). A wake is handed to the host's boot server
//     (Wakes) and ends when the boot server reports the packets sent.
//
// Writes are rare (people and Slurm's SuspendProgram make commands; acknowledgements
// are one per command), so a new command is written before it is answered, and
// everything else is queued and written by SyncState like heartbeats.

const (
	statePower = "power"
	// maxPowerRecords bounds the commands kept (memory and directory); the oldest
	// finished commands go first.
	maxPowerRecords = 10000
	// UserSlurm is who Slurm's SuspendProgram's power-offs are by; UserSchedule who
	// scheduled wakes are by.
	UserSlurm    = "slurm"
	UserSchedule = "schedule"
)

type powerState struct {
	mu       sync.Mutex
	writeMu  sync.Mutex // serialises Request: decide, write, commit
	cmds     map[string]wire.PowerRecord
	dirty    map[string]bool // command IDs to write
	dead     map[string]bool // to delete
	failures map[string]string
}

func (p *powerState) init() {
	if p.cmds == nil {
		p.cmds = map[string]wire.PowerRecord{}
		p.dirty, p.dead, p.failures = map[string]bool{}, map[string]bool{}, map[string]string{}
	}
}

// idSeq orders the IDs one process makes within the same microsecond (a fixed demo
// clock makes every instant the same): audit entries sort by ID after their time.
var idSeq atomic.Uint64

// newID is prefix, the time, a sequence number and a random part: sortable by time,
// unique across replicas.
func newID(prefix string, now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s%s-%06d-%s", prefix, now.UTC().Format("20060102T150405.000000Z"), idSeq.Add(1)%1000000, hex.EncodeToString(b[:]))
}

// ---- requests ----

// Request records a power command for each of hosts (already authorised by the
// caller for every host it knows), by user by, at now. Per host it is accepted (a
// command ID) or refused with the reason:
//   - unknown hosts;
//   - reboot and power-off need the host's agent alive (a fresh heartbeat): an agent
//     that is not running cannot carry them out;
//   - a power-off is refused while the last fresh heartbeat reports users logged in
//     (Sessions > 0), forced or not; the agent refuses it too, should someone log in
//     in between;
//   - a wake needs a boot server (it sends the magic packet).
//
// A new command supersedes the host's pending ones (a wake cancels a pending power-off).
// The accepted commands are in the directory before Request returns.
func (pw *Power) Request(ctx context.Context, by string, op wire.PowerOp, hosts []string, force bool, reason string, now time.Time) (*wire.HostPowerResponse, error) {
	if !slices.Contains(wire.PowerOps, op) {
		return nil, model.Invalid("op %q: must be reboot, poweroff or wake", op)
	}
	if err := names.Text("reason", reason); err != nil {
		return nil, model.Invalid("%v", err)
	}
	if len(hosts) == 0 {
		return nil, model.Invalid("no hosts given")
	}
	if len(hosts) > wire.MaxPowerHosts {
		return nil, model.Invalid("%d hosts in one request; at most %d", len(hosts), wire.MaxPowerHosts)
	}
	s := pw.s
	p := &pw.state
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	snap := s.Snapshot()
	res := &wire.HostPowerResponse{Op: op, Hosts: []wire.HostPowerResult{}}
	var put []wire.PowerRecord
	p.mu.Lock()
	p.init()
	pending := p.pendingLocked()
	p.mu.Unlock()
	for _, name := range hosts {
		r := wire.HostPowerResult{Host: name}
		h := snap.Site.Host(name)
		st, seen := s.agents.get(name)
		fresh := seen && now.Sub(st.Received) <= wire.StaleAfter
		switch {
		case h == nil:
			r.Reason = fmt.Sprintf("%q is not a host of this site", name)
		case op != wire.OpWake && !fresh:
			r.Reason = "the PC is off or its agent is not running (" + lastHeard(st, seen, snap) + "); nothing can " + string(op) + " it"
		case op == wire.OpPowerOff && st.Sessions > 0:
			r.Reason = fmt.Sprintf("%d user session(s) logged in (heartbeat at %s): a power-off is never forced; the agent refuses it too", st.Sessions, st.Received.In(snap.Engine.Location()).Format("15:04:05"))
		case op == wire.OpWake && wakeTarget(snap.Resolver, h, now) == nil:
			r.Reason = "no boot server serves the host: nothing can send its Wake-on-LAN packet"
		default:
			id := newID("pw-", now)
			r.Accepted, r.ID = true, id
			rec := wire.PowerRecord{
				PowerCommand: wire.PowerCommand{ID: id, Op: op, Requested: now.UTC(), By: by, Reason: reason, Force: force},
				Host:         name, State: wire.CommandPending, Updated: now.UTC(), Instance: st.Instance,
			}
			for _, old := range pending[name] {
				old.State, old.Updated = wire.CommandRefused, now.UTC()
				old.Result = "superseded by " + string(op) + " " + id + " (" + by + ")"
				put = append(put, old)
			}
			put = append(put, rec)
		}
		res.Hosts = append(res.Hosts, r)
	}
	// In the directory before it is answered: "accepted" must survive this replica.
	if s.state != nil {
		for _, rec := range put {
			doc, err := json.Marshal(rec)
			if err != nil {
				return nil, err
			}
			if err := s.state.PutState(ctx, statePower, rec.ID, doc); err != nil {
				return nil, err
			}
		}
	}
	var trail []wire.AuditEntry
	p.mu.Lock()
	for _, rec := range put {
		p.cmds[rec.ID] = rec
		if rec.Final() { // superseded: its end belongs in the trail like any other
			trail = append(trail, finishEntry(rec, now))
		}
	}
	p.evictLocked(s.state != nil)
	p.mu.Unlock()
	s.addAudit(append(trail, powerAudit(by, op, force, reason, res, now))...)
	return res, nil
}

func lastHeard(st wire.HostStatus, seen bool, snap *Snapshot) string {
	if !seen {
		return "no heartbeat ever"
	}
	return "last heartbeat " + st.Received.In(snap.Engine.Location()).Format("2006-01-02 15:04:05 MST")
}

func powerAudit(by string, op wire.PowerOp, force bool, reason string, res *wire.HostPowerResponse, now time.Time) wire.AuditEntry {
	var hosts, detail []string
	acc := 0
	for _, r := range res.Hosts {
		hosts = append(hosts, r.Host)
		if r.Accepted {
			acc++
			detail = append(detail, r.Host+": accepted "+r.ID)
		} else {
			detail = append(detail, r.Host+": refused: "+r.Reason)
		}
	}
	what := string(op)
	if force {
		what += " --force"
	}
	sum := fmt.Sprintf("%s %s: %d accepted, %d refused", what, compactHosts(hosts), acc, len(res.Hosts)-acc)
	if reason != "" {
		sum += " (reason: " + reason + ")"
	}
	return wire.AuditEntry{ID: newID("", now), Time: now.UTC(), Kind: wire.AuditPower, User: by, Target: compactHosts(hosts), Hosts: hosts, Summary: sum, Detail: detail}
}

// compactHosts shortens a long host list for a summary line.
func compactHosts(h []string) string {
	if len(h) <= 5 {
		return strings.Join(h, ",")
	}
	return strings.Join(h[:5], ",") + fmt.Sprintf(",… (%d hosts)", len(h))
}

// pendingLocked is every pending command by host.
func (p *powerState) pendingLocked() map[string][]wire.PowerRecord {
	out := map[string][]wire.PowerRecord{}
	for _, r := range p.cmds {
		if !r.Final() {
			out[r.Host] = append(out[r.Host], r)
		}
	}
	return out
}

// Cancel ends host's pending power-offs, with why (Slurm resumed the host: its
// earlier SuspendProgram power-off must not switch off the PC it now wants).
func (pw *Power) Cancel(host, why string, now time.Time) {
	p := &pw.state
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	for _, r := range p.pendingLocked()[host] {
		if r.Op == wire.OpPowerOff {
			p.finishLocked(pw.s, r, wire.CommandRefused, why, now)
		}
	}
}

// finishLocked ends r with state and result, queues it and records its end in the audit
// trail (whose lock is taken under p.mu, never the other way round).
func (p *powerState) finishLocked(s *Service, r wire.PowerRecord, state wire.CommandState, result string, now time.Time) {
	r.State, r.Result, r.Updated = state, result, now.UTC()
	p.cmds[r.ID] = r
	delete(p.failures, r.ID)
	p.markLocked(s, r.ID)
	s.addAudit(finishEntry(r, now))
}

// finishEntry is the audit entry of a command's end.
func finishEntry(r wire.PowerRecord, now time.Time) wire.AuditEntry {
	sum := fmt.Sprintf("%s %s (%s, by %s): %s", r.Op, r.Host, r.ID, r.By, r.State)
	if r.Result != "" {
		sum += ": " + r.Result
	}
	return wire.AuditEntry{ID: newID("", now), Time: now.UTC(), Kind: wire.AuditPower, User: r.By, Target: r.Host, Hosts: []string{r.Host}, Summary: sum}
}

func (p *powerState) markLocked(s *Service, id string) {
	if s.state == nil {
		return
	}
	delete(p.dead, id)
	p.dirty[id] = true
	s.agents.wake()
}

// evictLocked drops the oldest finished commands beyond maxPowerRecords.
func (p *powerState) evictLocked(durable bool) {
	if len(p.cmds) > maxPowerRecords {
		var fin []wire.PowerRecord
		for _, r := range p.cmds {
			if r.Final() {
				fin = append(fin, r)
			}
		}
		sort.Slice(fin, func(i, j int) bool { return fin[i].Updated.Before(fin[j].Updated) })
		for _, r := range fin[:min(len(fin), len(p.cmds)-maxPowerRecords)] {
			delete(p.cmds, r.ID)
			if durable {
				delete(p.dirty, r.ID)
				p.dead[r.ID] = true
			}
		}
	}
}

// ---- the agent's side ----

// Pending is the command host's agent is to carry out: its newest pending reboot or
// power-off (nil: none). GET /api/v1/agent/config hands it out until the agent's
// heartbeat reports it done or refused.
func (pw *Power) Pending(host string) *wire.PowerCommand {
	p := &pw.state
	p.mu.Lock()
	defer p.mu.Unlock()
	var best *wire.PowerRecord
	for _, r := range p.cmds {
		if r.Host == host && !r.Final() && r.Op != wire.OpWake && (best == nil || r.Requested.After(best.Requested)) {
			r := r
			best = &r
		}
	}
	if best == nil {
		return nil
	}
	c := best.PowerCommand
	return &c
}

// ackPower reads what host's newest heartbeat says of its pending commands: the agent's
// answer to an ID (done, refused), or a new agent instance, which means the PC restarted
// after the command (a reboot done, a power-off followed by a wake).
func (pw *Power) ack(st wire.HostStatus, now time.Time) {
	s := pw.s
	p := &pw.state
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	for _, r := range p.pendingLocked()[st.Host] {
		if r.Op == wire.OpWake {
			continue
		}
		switch {
		case st.Power != nil && st.Power.ID == r.ID && st.Power.State != wire.CommandPending:
			p.finishLocked(s, r, st.Power.State, st.Power.Reason, now)
		case r.Instance != "" && st.Instance != "" && st.Instance != r.Instance && !st.Received.Before(r.Requested):
			p.finishLocked(s, r, wire.CommandDone, "the agent restarted after the request (new instance "+st.Instance+")", now)
		case st.Power != nil && st.Power.ID == r.ID && st.Power.Reason != r.Result:
			// Still pending (a countdown, waiting for a logout): shown, not written.
			r.Result = st.Power.Reason
			p.cmds[r.ID] = r
		}
	}
}

// Commands lists the commands kept, newest first (host != "": of that host only).
func (pw *Power) Commands(host string) []wire.PowerRecord {
	p := &pw.state
	p.mu.Lock()
	defer p.mu.Unlock()
	out := []wire.PowerRecord{}
	for _, r := range p.cmds {
		if host == "" || r.Host == host {
			if f, ok := p.failures[r.ID]; ok && !r.Final() {
				r.Result = "last send failed: " + f
			}
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Requested.Equal(out[j].Requested) {
			return out[i].Requested.After(out[j].Requested)
		}
		return out[i].Host < out[j].Host
	})
	return out
}

// ---- wakes ----

// wakeTarget is the boot server that sends h's magic packet: the one serving it.
func wakeTarget(res *resolve.Resolver, h *model.Host, now time.Time) *model.BootServer {
	bs, _ := res.BootServer(h, resolve.Query{At: now})
	return bs
}

// wakeAddr is where the packet goes: the directed broadcast of the boot server's subnet
// (the boot server sits on the PCs' network: it answers their DHCP), else the limited
// broadcast of the boot server's own link.
func wakeAddr(bs *model.BootServer) string {
	if a, err := wol.BroadcastAddr(bs.Subnet, powersave.WakePort); err == nil {
		return a
	}
	return fmt.Sprintf("255.255.255.255:%d", powersave.WakePort)
}

// Wakes is what boot server server is to send now: pending wake commands of the hosts it
// serves, and the scheduled wakes due (sitemgmt/wake) not sent yet.
func (pw *Power) Wakes(server string, now time.Time) (wire.Wakes, error) {
	s := pw.s
	snap := s.Snapshot()
	bs := snap.Site.BootServer(server)
	if bs == nil {
		return wire.Wakes{}, model.Invalid("unknown boot server %q", server)
	}
	out := wire.Wakes{Server: server, Wakes: []wire.Wake{}}
	addr := wakeAddr(bs)
	p := &pw.state
	p.mu.Lock()
	p.init()
	for _, r := range p.cmds {
		if r.Op != wire.OpWake || r.Final() {
			continue
		}
		h := snap.Site.Host(r.Host)
		if h == nil {
			continue
		}
		if b := wakeTarget(snap.Resolver, h, now); b == nil || b.Name != server {
			continue
		}
		out.Wakes = append(out.Wakes, wire.Wake{ID: r.ID, Host: h.Name, MAC: h.MAC, Addr: addr, By: r.By, Reason: r.Reason, Due: r.Requested})
	}
	p.mu.Unlock()
	for _, w := range pw.scheduledWakes(snap, server, now) {
		out.Wakes = append(out.Wakes, w)
	}
	sort.Slice(out.Wakes, func(i, j int) bool { return out.Wakes[i].Host < out.Wakes[j].Host })
	return out, nil
}

// scheduledWakes are the wakes sitemgmt/wake finds due for server's hosts at now, less
// those already sent (recorded under their ID).
func (pw *Power) scheduledWakes(snap *Snapshot, server string, now time.Time) []wire.Wake {
	s := pw.s
	bs := snap.Site.BootServer(server)
	if bs == nil {
		return nil
	}
	boot := map[string][]float64{}
	beats := map[string]wire.HostStatus{}
	for _, st := range s.agents.all() {
		beats[st.Host] = st
		if h := snap.Site.Host(st.Host); h != nil && st.BootSeconds > 0 {
			boot[h.Pool] = append(boot[h.Pool], st.BootSeconds)
		}
	}
	var in []wake.Host
	byName := map[string]*model.Host{}
	for i := range snap.Site.Hosts {
		h := &snap.Site.Hosts[i]
		if b := wakeTarget(snap.Resolver, h, now); b == nil || b.Name != server {
			continue
		}
		st, ok := beats[h.Name]
		_, d := snap.Resolver.ModeAt(h, now)
		x := wake.Host{Name: h.Name, Pool: h.Pool, Off: !ok || now.Sub(st.Received) > wire.StaleAfter, Next: d.Next, NextMode: d.NextMode}
		if m := snap.Site.Mode(d.NextMode); m != nil {
			x.NextKind = m.Kind
		}
		in = append(in, x)
		byName[h.Name] = h
	}
	loc := snap.Engine.Location()
	var out []wire.Wake
	p := &pw.state
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range wake.Due(in, boot, now) {
		if _, sent := p.cmds[w.ID]; sent {
			continue
		}
		out = append(out, wire.Wake{ID: w.ID, Host: w.Host, MAC: byName[w.Host].MAC, Addr: wakeAddr(bs), By: UserSchedule,
			Reason: "mode " + w.Mode + " at " + w.Boundary.In(loc).Format("Mon 15:04"), Due: w.Due})
	}
	return out
}

// WakesSent records boot server server's report: the wakes in sent left it (a wake
// command is then done: Wake-on-LAN has no answer), those in failed did not (kept
// pending, with the error shown, and handed out again).
func (pw *Power) WakesSent(server string, rep wire.WakesSent, now time.Time) error {
	s := pw.s
	snap := s.Snapshot()
	if snap.Site.BootServer(server) == nil {
		return model.Invalid("unknown boot server %q", server)
	}
	if len(rep.Sent)+len(rep.Failed) > wire.MaxPowerHosts {
		return model.Invalid("too many wakes in one report")
	}
	sched := map[string]wire.Wake{}
	for _, w := range pw.scheduledWakes(snap, server, now) {
		sched[w.ID] = w
	}
	p := &pw.state
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	// Only wakes this boot server was given count: its account must not end another's.
	mine := func(r wire.PowerRecord) bool {
		h := snap.Site.Host(r.Host)
		b := (*model.BootServer)(nil)
		if h != nil {
			b = wakeTarget(snap.Resolver, h, now)
		}
		return r.Op == wire.OpWake && !r.Final() && b != nil && b.Name == server
	}
	for _, id := range rep.Sent {
		if r, ok := p.cmds[id]; ok {
			if mine(r) {
				p.finishLocked(s, r, wire.CommandSent, "magic packet sent by boot server "+server, now)
			}
			continue
		}
		if w, ok := sched[id]; ok {
			r := wire.PowerRecord{
				PowerCommand: wire.PowerCommand{ID: id, Op: wire.OpWake, Requested: w.Due.UTC(), By: UserSchedule, Reason: w.Reason},
				Host:         w.Host, State: wire.CommandPending,
			}
			p.finishLocked(s, r, wire.CommandSent, "magic packet sent by boot server "+server+" before "+w.Reason, now)
		}
	}
	for id, why := range rep.Failed {
		if r, ok := p.cmds[id]; ok && mine(r) {
			p.failures[id] = wire.OneLine(why, wire.MaxGuestReason)
		}
	}
	p.evictLocked(s.state != nil)
	return nil
}

// ---- the store ----

// mergeDoc takes a power command document from the store. A command the store holds in
// a later state wins; a final state never goes back to pending; our own unwritten change
// wins over what the store still has.
func (p *powerState) mergeDoc(log *slog.Logger, key string, doc []byte, deleted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	if p.dirty[key] {
		return
	}
	if deleted {
		delete(p.cmds, key)
		return
	}
	var r wire.PowerRecord
	if err := json.Unmarshal(doc, &r); err != nil || r.ID != key || names.Hostname(r.Host) != nil {
		log.Warn("state: skipping a power command document that does not decode", "id", key, "err", err)
		return
	}
	if cur, ok := p.cmds[key]; ok && (cur.Final() && !r.Final() || r.Updated.Before(cur.Updated)) {
		return
	}
	p.cmds[key] = r
}

// flush writes the queued power command documents; what fails stays queued.
func (pw *Power) flush(ctx context.Context) error {
	p := &pw.state
	p.mu.Lock()
	p.init()
	p.mu.Unlock()
	return flushDocs(ctx, &p.mu, p.dirty, p.dead, pw.s.state, statePower, func(id string) ([]byte, bool) {
		r, ok := p.cmds[id]
		if !ok {
			return nil, false
		}
		doc, err := json.Marshal(r)
		return doc, err == nil
	})
}

func (p *powerState) pendingWrites() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.dirty) + len(p.dead)
}
