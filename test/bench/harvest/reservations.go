package main

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// The reservations benchmark (issue 15): one Slurm queue over the whole pool, replayed
// through a week with guest-stopping changes (Room.Stops: course-VM slots in the
// timetable, short-notice exceptions), with and without Overtime telling Slurm in
// advance. Where Simulate gives every host an endless job queue of its own (and ignores
// Room.Stops), this is a pool-wide discrete-event simulation of one queue and Slurm's
// placement.
//
// The guest: each host's compute guest under a sharing policy (overtime-default), as
// Simulate replays it (guestRates: the real policy engine, the same compute model: full
// speed gets the cores the desktop does not use, throttled at most ThrottleCPU % of
// them), and in addition stopped (no guest, rate 0) in every stop window of its room.
// Guest start and stop are instantaneous.
//
// Jobs (the job stream, jobStream): whole-node jobs (a job gets all of a PC's cores and
// does runtime × cores core-seconds of work, so it takes longer than its runtime while
// throttled) from a backlog that never runs dry, in submission order, the same sequence
// in every variant. Three classes: short (45 %: test runs, array tasks; lognormal runtime
// median 10 min, sigma 0.8, at most 1 h), medium (40 %: median 1.5 h, sigma 0.7, at most
// 8 h) and long (15 %: median 8 h, sigma 0.5, at most 22 h). Users over-request: the
// runtime uses a fraction of the time limit drawn uniformly in [0.1, 0.9], and the
// request is rounded up to a usual value (15 min, 30 min, 1, 2, 4, 8, 12, 24 h; 24 h is
// the partition's maximum). A job that checkpoints when it gets a signal: none of the
// short, 30 % of the medium and 60 % of the long ones.
//
// Slurm: a job on a node ends at completion, at its time limit (killed, TIMEOUT: its
// work is lost, not requeued), or when the guest stops under it (the node goes down:
// requeued with its priority, the work since its last checkpoint lost). A node whose
// guest runs and has no job starts one at once (jobs end and start within the same
// instant, as Simulate assumes), scanning the first BackfillDepth (500, bf_max_job_test)
// pending jobs in priority (submission) order:
//
//   - without reservations (today) the first pending job starts: nothing tells Slurm of
//     a coming stop, so jobs whose limit crosses a course slot are started and requeued
//     when the guest stops under them;
//   - with reservations the sync daemon keeps a maintenance reservation on each node for
//     every stop window known on a rolling Horizon (7 days): a stop is visible from
//     max(Announced, Start − Horizon); a job starts on a node only if start + time limit
//     ≤ the node's next visible reservation (backfill's rule), so it is the first
//     pending job that fits; a node for which nothing in the window fits stays idle and
//     tries again every BackfillInterval (30 s, bf_interval) and whenever a job is
//     requeued;
//   - with signals in addition, a job that a short-notice stop will hit (its limit
//     crosses the stop) gets a warning signal SignalLead (10 min) before the stop, or at
//     the announcement when that is later. A job that checkpoints saves its state as of
//     the signal if the checkpoint has CheckpointTime (2 min) before the stop; the
//     requeued job resumes from it (its limit unchanged). Work after the signal is lost.
//
// Known stops are in the schedule long before the week (Announced two weeks ahead), so
// with reservations no job can be running when one begins; a job that would outrun its
// limit is killed by Slurm at the limit, before the reservation. Short-notice stops are
// visible 30 min ahead: jobs already running then are hit.

// JobClass is one kind of job in the stream.
type JobClass struct {
	Name           string         `json:"name"`
	Weight         float64        `json:"weight"`
	Median         model.Duration `json:"median"`
	Sigma          float64        `json:"sigma"`
	Max            model.Duration `json:"max"`
	CheckpointProb float64        `json:"checkpointProb"`
}

// SlurmOptions are the job stream's and Slurm's parameters (see the comment above).
type SlurmOptions struct {
	Classes          []JobClass       `json:"classes"`
	Use              [2]float64       `json:"limitUse"` // the fraction of its limit a job's runtime uses: uniform in [Use[0], Use[1]]
	Limits           []model.Duration `json:"limits"`   // time limits users ask for (rounded up to one of these)
	Horizon          model.Duration   `json:"horizon"`
	SignalLead       model.Duration   `json:"signalLead"`
	CheckpointTime   model.Duration   `json:"checkpointTime"`
	BackfillDepth    int              `json:"backfillDepth"`
	BackfillInterval model.Duration   `json:"backfillInterval"`
	JobSeed          uint64           `json:"jobSeed"` // 0: the trace's seed
}

// DefaultSlurmOptions are the values documented above.
func DefaultSlurmOptions() SlurmOptions {
	m := func(n int) model.Duration { return model.Duration(time.Duration(n) * time.Minute) }
	var limits []model.Duration
	for _, n := range []int{15, 30, 60, 120, 240, 480, 720, 1440} {
		limits = append(limits, m(n))
	}
	return SlurmOptions{
		Classes: []JobClass{
			{Name: "short", Weight: 0.45, Median: m(10), Sigma: 0.8, Max: m(60), CheckpointProb: 0},
			{Name: "medium", Weight: 0.40, Median: m(90), Sigma: 0.7, Max: m(8 * 60), CheckpointProb: 0.3},
			{Name: "long", Weight: 0.15, Median: m(8 * 60), Sigma: 0.5, Max: m(22 * 60), CheckpointProb: 0.6},
		},
		Use: [2]float64{0.1, 0.9}, Limits: limits,
		Horizon: model.Duration(7 * 24 * time.Hour), SignalLead: m(10), CheckpointTime: m(2),
		BackfillDepth: 500, BackfillInterval: model.Duration(30 * time.Second),
	}
}

// Variant is how much Slurm is told in advance.
type Variant struct {
	Name         string `json:"name"`
	Reservations bool   `json:"reservations"`
	Signals      bool   `json:"signals"`
}

// Variants are the three compared: today, reservations, reservations and signals.
func Variants() []Variant {
	return []Variant{
		{Name: "no reservations (today)"},
		{Name: "reservations", Reservations: true},
		{Name: "reservations + signals", Reservations: true, Signals: true},
	}
}

// SlurmResult is one variant over a whole trace. CPU-hours are core-hours.
type SlurmResult struct {
	Variant           string  `json:"variant"`
	DeliveredCPUHours float64 `json:"deliveredCpuHours"` // the cores the jobs got (including work later lost)
	UsefulCPUHours    float64 `json:"usefulCpuHours"`    // delivered minus wasted
	WastedCPUHours    float64 `json:"wastedCpuHours"`    // lost by requeues and time-outs
	WastedKnown       float64 `json:"wastedKnownCpuHours"`
	WastedShort       float64 `json:"wastedShortNoticeCpuHours"`
	WastedTimeout     float64 `json:"wastedTimeoutCpuHours"`
	IdleCPUHours      float64 `json:"idleCpuHours"` // a guest ran with cores for a job but had none (nothing fitted)
	JobsStarted       int     `json:"jobsStarted"`  // starts, restarts of requeued jobs included
	JobsCompleted     int     `json:"jobsCompleted"`
	RequeuedKnown     int     `json:"requeuedKnown"` // by a stop in the timetable (course-VM slot)
	RequeuedShort     int     `json:"requeuedShortNotice"`
	RequeuedOther     int     `json:"requeuedOther"` // the policy evicted the guest
	Signalled         int     `json:"signalled"`
	Resumed           int     `json:"resumedFromCheckpoint"` // requeued with a checkpoint taken at the signal
	TimedOut          int     `json:"timedOut"`
	RunningAtEnd      int     `json:"runningAtEnd"`
	// ClassCompleted is jobs completed by class (short, medium, long).
	ClassCompleted map[string]int `json:"classCompleted"`
}

// rateSeg is a host's guest from t on: up (the guest exists) and the cores a job in it gets.
type rateSeg struct {
	t    int64
	rate float64
	up   bool
	stop int // index into the room's Stops while stopped by one, else -1
}

// guestRates replays host h through the policy as runHost does and returns the guest's
// rate over the week, with the room's stop windows masked out.
func guestRates(tr *Trace, h int, segs []seg, spec PolicySpec, env Env) []rateSeg {
	cores := float64(env.Cores)
	share := float64(spec.ThrottleCPU) / 100
	pol := spec.New(env)
	var out []rateSeg
	emit := func(t int64, rate float64, up bool) {
		if n := len(out); n > 0 && out[n-1].rate == rate && out[n-1].up == up {
			return
		}
		if n := len(out); n > 0 && out[n-1].t == t {
			out[n-1] = rateSeg{t, rate, up, -1}
			return
		}
		out = append(out, rateSeg{t, rate, up, -1})
	}
	rateOf := func(a model.GuestAction, load float64) (float64, bool) {
		switch a {
		case model.ActionRun:
			return max(0, cores-load), true
		case model.ActionThrottle:
			return min(share*cores, max(0, cores-load)), true
		case model.ActionFreeze:
			return 0, true
		}
		return 0, false
	}
	i := 0
	act := pol.Decide(segs[0].obs(0, env.Cores))
	for t := int64(0); t < tr.Length; {
		r, up := rateOf(act, segs[i].load)
		emit(t, r, up)
		next := tr.Length
		if i+1 < len(segs) {
			next = segs[i+1].t
		}
		if dl := pol.NextDeadline(); dl > t && dl < next {
			next = dl
		}
		t = next
		if t >= tr.Length {
			break
		}
		if i+1 < len(segs) && segs[i+1].t == t {
			i++
		}
		act = pol.Decide(segs[i].obs(t, env.Cores))
	}
	return maskStops(out, tr.Rooms[tr.Hosts[h].Room].Stops, tr.Length)
}

// maskStops stops the guest (rate 0, down) in each stop window, marking the segments with
// the stop's index.
func maskStops(in []rateSeg, stops []Stop, length int64) []rateSeg {
	if len(stops) == 0 {
		return in
	}
	at := func(t int64) rateSeg { // the unmasked segment in force at t
		k, ok := slices.BinarySearchFunc(in, t, func(s rateSeg, t int64) int { return cmpInt(s.t, t) })
		if !ok {
			k--
		}
		return in[k]
	}
	var out []rateSeg
	add := func(s rateSeg) {
		if n := len(out); n > 0 && out[n-1].t == s.t {
			out[n-1] = s
			return
		}
		if n := len(out); n > 0 && out[n-1].rate == s.rate && out[n-1].up == s.up && out[n-1].stop == s.stop {
			return
		}
		out = append(out, s)
	}
	j := 0
	for k, st := range stops {
		for ; j < len(in) && in[j].t < st.Start; j++ {
			add(in[j])
		}
		if st.Start >= length {
			break
		}
		add(rateSeg{t: st.Start, stop: k})
		for ; j < len(in) && in[j].t < st.End; j++ {
		}
		if st.End < length {
			s := at(st.End)
			s.t = st.End
			add(s)
		}
	}
	for ; j < len(in); j++ {
		add(in[j])
	}
	return out
}

// simJob is one job of the stream.
type simJob struct {
	id    int
	class int
	work  float64 // core-seconds at full speed on the whole node
	limit float64 // seconds of wall time
	ckpt  bool    // checkpoints on the warning signal
	base  float64 // work saved by a checkpoint in an earlier run
}

// jobStream draws the backlog's jobs in submission order.
type jobStream struct {
	rng   *rand.Rand
	opt   SlurmOptions
	cores float64
	n     int
}

func newJobStream(opt SlurmOptions, seed uint64, cores int) *jobStream {
	return &jobStream{rng: rand.New(rand.NewPCG(seed, streamSlrm)), opt: opt, cores: float64(cores)}
}

func (s *jobStream) next() *simJob {
	var total float64
	for _, c := range s.opt.Classes {
		total += c.Weight
	}
	u, ci := s.rng.Float64()*total, 0
	for ci < len(s.opt.Classes)-1 && u >= s.opt.Classes[ci].Weight {
		u -= s.opt.Classes[ci].Weight
		ci++
	}
	c := s.opt.Classes[ci]
	med := time.Duration(c.Median).Seconds()
	rt := min(time.Duration(c.Max).Seconds(), max(60, med*math.Exp(c.Sigma*s.rng.NormFloat64())))
	use := s.opt.Use[0] + s.rng.Float64()*(s.opt.Use[1]-s.opt.Use[0])
	want := rt / use
	limit := time.Duration(s.opt.Limits[len(s.opt.Limits)-1]).Seconds()
	for _, l := range s.opt.Limits {
		if time.Duration(l).Seconds() >= want {
			limit = time.Duration(l).Seconds()
			break
		}
	}
	rt = min(rt, limit) // the partition's maximum caps the request; the job fits in it
	ckpt := s.rng.Float64() < c.CheckpointProb
	s.n++
	return &simJob{id: s.n, class: ci, work: rt * s.cores, limit: limit, ckpt: ckpt}
}

// nodeState is one host in the pool simulation.
type nodeState struct {
	h     int
	segs  []rateSeg
	i     int // the segment in force
	stops []Stop
	job   *simJob
	start float64 // the job's start
	last  float64 // work accounted up to here
	done  float64 // work of this run
	saved float64 // work of this run saved by the checkpoint at the signal
	sigAt float64 // pending signal (math.Inf: none)
	sigS  int64   // start of the stop the signal warns of
	retry float64 // idle: next scheduling attempt (math.Inf: none)
	next  float64 // this host's next event (heap key)
	idx   int     // heap index
}

type nodeHeap []*nodeState

func (q nodeHeap) Len() int { return len(q) }
func (q nodeHeap) Less(i, j int) bool {
	if q[i].next != q[j].next {
		return q[i].next < q[j].next
	}
	return q[i].h < q[j].h
}
func (q nodeHeap) Swap(i, j int)  { q[i], q[j] = q[j], q[i]; q[i].idx = i; q[j].idx = j }
func (q *nodeHeap) Push(x any)    { n := x.(*nodeState); n.idx = len(*q); *q = append(*q, n) }
func (q *nodeHeap) Pop() any      { old := *q; n := old[len(old)-1]; *q = old[:len(old)-1]; return n }
func (n *nodeState) seg() rateSeg { return n.segs[n.i] }

// slurmSim is one variant's run over the pool.
type slurmSim struct {
	tr      *Trace
	v       Variant
	opt     SlurmOptions
	stream  *jobStream
	pending []*simJob // in priority order (id)
	nodes   []*nodeState
	q       nodeHeap
	r       *SlurmResult
	horizon float64
}

// SimulateSlurm replays the trace's pool through one Slurm queue in each variant, the
// guests under spec (overtime-default). rates, when not nil, are the hosts' guestRates
// (computed here otherwise), shared by the variants: the same guest, the same jobs.
func SimulateSlurm(tr *Trace, spec PolicySpec, variants []Variant, opt SlurmOptions, rates [][]rateSeg) []SlurmResult {
	if opt.JobSeed == 0 {
		opt.JobSeed = tr.Seed
	}
	if rates == nil {
		rates = poolRates(tr, spec, DefaultSimOptions())
	}
	var out []SlurmResult
	for _, v := range variants {
		s := &slurmSim{tr: tr, v: v, opt: opt, stream: newJobStream(opt, opt.JobSeed, tr.Params.Cores),
			r: &SlurmResult{Variant: v.Name, ClassCompleted: map[string]int{}}, horizon: time.Duration(opt.Horizon).Seconds()}
		s.run(rates)
		out = append(out, *s.r)
	}
	return out
}

// poolRates is guestRates for every host.
func poolRates(tr *Trace, spec PolicySpec, so SimOptions) [][]rateSeg {
	env := Env{Start: tr.Params.Start, Cores: tr.Params.Cores}
	window := int64(so.ActiveWindow / time.Second)
	rates := make([][]rateSeg, len(tr.Hosts))
	for h := range tr.Hosts {
		rates[h] = guestRates(tr, h, timeline(tr, h, window), spec, env)
	}
	return rates
}

func (s *slurmSim) run(rates [][]rateSeg) {
	length := float64(s.tr.Length)
	// Short-notice announcements, in time order: when signals are due.
	type note struct {
		at   float64
		room int
		stop Stop
	}
	var notes []note
	for ri, room := range s.tr.Rooms {
		for _, st := range room.Stops {
			if st.Kind == StopShortNotice {
				notes = append(notes, note{float64(max(st.Announced, 0)), ri, st})
			}
		}
	}
	slices.SortStableFunc(notes, func(a, b note) int { return cmpInt(int64(a.at), int64(b.at)) })
	byRoom := map[int][]*nodeState{}
	for h := range s.tr.Hosts {
		n := &nodeState{h: h, segs: rates[h], stops: s.tr.Rooms[s.tr.Hosts[h].Room].Stops, sigAt: math.Inf(1), retry: math.Inf(1)}
		s.nodes = append(s.nodes, n)
		byRoom[s.tr.Hosts[h].Room] = append(byRoom[s.tr.Hosts[h].Room], n)
	}
	for _, n := range s.nodes {
		if n.seg().up {
			s.schedule(n, 0)
		}
		n.next = s.nextEvent(n)
		heap.Push(&s.q, n)
	}
	ni := 0
	for {
		t := math.Inf(1)
		if len(s.q) > 0 {
			t = s.q[0].next
		}
		if ni < len(notes) && notes[ni].at <= t {
			nt := notes[ni]
			ni++
			if s.v.Signals {
				for _, n := range byRoom[nt.room] {
					s.advance(n, nt.at)
					if n.job != nil && n.start+n.job.limit > float64(nt.stop.Start) {
						n.sigAt, n.sigS = math.Max(nt.at, float64(nt.stop.Start)-time.Duration(s.opt.SignalLead).Seconds()), nt.stop.Start
						s.reschedule(n)
					}
				}
			}
			continue
		}
		if t >= length {
			break
		}
		n := s.q[0]
		s.step(n, t)
		s.reschedule(n)
	}
	for _, n := range s.nodes {
		s.advance(n, length)
		if n.job != nil {
			s.r.RunningAtEnd++
		}
	}
	s.r.UsefulCPUHours = s.r.DeliveredCPUHours - s.r.WastedCPUHours
}

func (s *slurmSim) reschedule(n *nodeState) {
	n.next = s.nextEvent(n)
	heap.Fix(&s.q, n.idx)
}

// advance accounts host n's work from n.last to t at the rate in force (no event between).
func (s *slurmSim) advance(n *nodeState, t float64) {
	if t <= n.last {
		return
	}
	dt, sg := t-n.last, n.seg()
	if sg.rate > 0 {
		if n.job != nil {
			w := sg.rate * dt
			n.done += w
			s.r.DeliveredCPUHours += w / hour
		} else if sg.up {
			s.r.IdleCPUHours += sg.rate * dt / hour
		}
	}
	n.last = t
}

// nextEvent is the earliest of: the next rate segment, the job's completion, its time
// limit, its signal, an idle node's next scheduling attempt.
func (s *slurmSim) nextEvent(n *nodeState) float64 {
	t := math.Inf(1)
	if n.i+1 < len(n.segs) {
		t = float64(n.segs[n.i+1].t)
	}
	if j := n.job; j != nil {
		if r := n.seg().rate; r > 0 {
			t = math.Min(t, n.last+(j.work-j.base-n.done)/r)
		}
		t = math.Min(t, n.start+j.limit)
		t = math.Min(t, n.sigAt)
	} else if n.seg().up {
		t = math.Min(t, n.retry)
	}
	return math.Max(t, n.last)
}

// step handles what is due at host n at time t.
func (s *slurmSim) step(n *nodeState, t float64) {
	s.advance(n, t)
	const eps = 1e-3 // seconds: event times are sums of float seconds
	if j := n.job; j != nil && j.work-j.base-n.done <= 1e-6*j.work {
		s.r.JobsCompleted++
		s.r.ClassCompleted[s.opt.Classes[j.class].Name]++
		s.clear(n)
	}
	if j := n.job; j != nil && t >= n.start+j.limit-eps {
		s.r.TimedOut++
		w := (n.done + j.base) / hour
		s.r.WastedCPUHours += w
		s.r.WastedTimeout += w
		s.clear(n)
	}
	if n.job != nil && t >= n.sigAt-eps {
		s.r.Signalled++
		if n.job.ckpt && float64(n.sigS)-t >= time.Duration(s.opt.CheckpointTime).Seconds() {
			n.saved = n.done
		}
		n.sigAt = math.Inf(1)
	}
	for n.i+1 < len(n.segs) && float64(n.segs[n.i+1].t) <= t+eps {
		n.i++
		if sg := n.seg(); !sg.up && n.job != nil {
			s.requeue(n, sg.stop)
		}
	}
	if n.job == nil && n.seg().up && (math.IsInf(n.retry, 1) || t >= n.retry-eps) {
		s.schedule(n, t)
	}
}

func (s *slurmSim) clear(n *nodeState) {
	n.job, n.done, n.saved, n.sigAt = nil, 0, 0, math.Inf(1)
}

// requeue puts host n's job back into the queue: the guest stopped under it.
func (s *slurmSim) requeue(n *nodeState, stop int) {
	j := n.job
	lost := (n.done - n.saved) / hour
	s.r.WastedCPUHours += lost
	switch {
	case stop >= 0 && n.stops[stop].Kind == StopShortNotice:
		s.r.RequeuedShort++
		s.r.WastedShort += lost
	case stop >= 0:
		s.r.RequeuedKnown++
		s.r.WastedKnown += lost
	default:
		s.r.RequeuedOther++
	}
	if n.saved > 0 {
		s.r.Resumed++
		j.base += n.saved
	}
	s.clear(n)
	k, _ := slices.BinarySearchFunc(s.pending, j.id, func(p *simJob, id int) int { return p.id - id })
	s.pending = slices.Insert(s.pending, k, j)
	// A job back in the queue may fit a node that found nothing.
	for _, o := range s.nodes {
		if o != n && o.job == nil && !math.IsInf(o.retry, 1) {
			o.retry = n.last
			s.reschedule(o)
		}
	}
}

// nextReservation is the start of host n's next reservation visible at t (+Inf: none).
func (s *slurmSim) nextReservation(n *nodeState, t float64) float64 {
	for _, st := range n.stops {
		if float64(st.End) <= t {
			continue
		}
		if float64(st.Announced) <= t && float64(st.Start)-t <= s.horizon {
			return float64(st.Start)
		}
	}
	return math.Inf(1)
}

// schedule starts a job on idle host n at t: the first pending job (today) or the first
// among BackfillDepth whose limit ends before the node's next reservation.
func (s *slurmSim) schedule(n *nodeState, t float64) {
	for len(s.pending) < s.opt.BackfillDepth {
		s.pending = append(s.pending, s.stream.next())
	}
	res := math.Inf(1)
	if s.v.Reservations {
		res = s.nextReservation(n, t)
	}
	for k, j := range s.pending[:s.opt.BackfillDepth] {
		if t+j.limit <= res {
			s.pending = slices.Delete(s.pending, k, k+1)
			n.job, n.start, n.done, n.saved, n.sigAt, n.retry = j, t, 0, 0, math.Inf(1), math.Inf(1)
			s.r.JobsStarted++
			return
		}
	}
	n.retry = t + time.Duration(s.opt.BackfillInterval).Seconds()
}
