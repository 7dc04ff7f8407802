package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// The pool-week model.
//
// A synthetic but realistic week of a university PC pool, generated from a seed so that
// anyone can regenerate exactly the trace the published numbers come from. Every
// parameter is a field of Params; DefaultParams holds the values below.
//
// Pool: Hosts PCs (200) in rooms of RoomSize (20), Cores (4) cores each. The week starts
// on a Monday 00:00 UTC (2026-11-23, in the winter term) and lasts Days (7) days. Times
// in the trace are whole seconds since that instant.
//
// Lectures: per room, Monday to Friday, the slots start at 08:15, 10:15, 12:15, 14:15 and
// 16:15 and last 1 h 45 min (the last ends at 18:00); each slot is booked with probability
// LectureProb (0.6). In a booked slot each PC is used by a student with probability
// SeatProb (0.85), who logs in up to LectureLate (10 min) after the start and logs out up
// to LectureLate before the end. A lecture session is input bursts (exponential, mean
// LectureActiveMean = 4 min) separated by short pauses (exponential, mean
// LectureIdleMean = 1 min, cut at LectureIdleMax = 4 min: students follow an exercise, so
// a pause does not reach the 5-minute idle thresholds of screen savers and policies).
// Walk-ins are turned away from a booked room.
//
// Walk-ins: per room a Poisson process whose rate (arrivals per hour) follows the time of
// day: WalkInRate, highest 10:00-16:00 (6/h), lower 08:00-10:00 and 16:00-19:00 (3/h),
// low in the evening (1/h), near zero 23:00-07:00 (0.05/h); on Saturday and Sunday times
// WeekendFactor (0.3). An arrival takes a free PC in the room, chosen uniformly (none
// free: the student leaves), for a lognormal session (median SessionMedian = 45 min,
// sigma SessionSigma = 0.75, between 2 min and 6 h), cut at the room's next lecture.
// Within a session input comes in bursts: active periods exponential with mean
// ActiveMean (3 min) alternate with idle gaps exponential with mean IdleMean (2 min);
// with probability LongIdleProb (0.1) a gap is a long one (reading, a video, a phone
// call): LongIdleMin (10 min) plus exponential with mean LongIdleMean (10 min). The input
// inside a burst is treated as continuous (events every second or so).
//
// Remote sessions: per PC a Poisson process of SSHPerDay (0.2) ssh logins a day at any
// hour, lognormal length (median 20 min, sigma 1, at most 4 h), bursts of terminal input
// (active mean 2 min, idle mean 3 min). They may overlap a local session.
//
// Desktop load: a session contains one CPU load episode (a compile, a video, a notebook)
// with probability LoadProbWalkIn (0.3; lectures 0.2, ssh 0.3), starting uniformly in the
// session, lognormal length (median 5 min, sigma 0.7, cut at the session's end), using
// between LoadCoresMin and LoadCoresMax (1-2) cores, uniformly. Outside episodes a
// desktop's own CPU use is taken as zero.
//
// Schedule: the pool is in cluster mode (after hours) from ClusterFrom (22:00) to
// ClusterUntil (07:00) on weekdays and all weekend (Friday 22:00 to Monday 07:00), in
// desktop mode otherwise; a booked lecture slot is desktop mode regardless.
//
// Guest-stopping changes (the reservations benchmark, reservations.go; zero in
// DefaultParams, so the published harvest week has none): a booked lecture slot is a
// course-VM slot with probability CourseVMProb (ReservationParams: 0.35): the room's PCs
// reboot into the lecturer's VM and the compute guest is stopped for the slot. These are
// in the term's timetable, known weeks ahead (Announced two weeks before). In addition,
// short-notice exceptions (an exam or a make-up lecture in a room, in a course VM or
// another mode that stops the guest): per weekday a Poisson number with mean
// ShortNoticePerDay (1) for the whole pool, each in a room drawn uniformly and one of
// that day's slots the room has free (none free: dropped), one slot long, added to the
// schedule ShortNoticeLead (30 min) before it starts. The lectures' student sessions are
// unchanged (course-VM slots have students too; short-notice ones add none: the guest
// is stopped, who sits there does not matter to it).
//
// Random numbers: math/rand/v2's PCG, seeded with (seed, stream), one stream per room
// (timetable and walk-ins) and per PC (ssh sessions), so a room's week does not depend
// on how many rooms are generated before it.

// TraceFormat names the layout of the JSON trace; it changes when the layout or the
// model's meaning changes.
const TraceFormat = "overtime-poolweek/1"

// Random stream numbers (the second PCG seed word).
const (
	streamRoom  = 1 << 20 // + room index
	streamSSH   = 2 << 20 // + host index
	streamJobs  = 3 << 20 // + host index (sim.go: the job stream)
	streamStop  = 4 << 20 // + room index: which lecture slots are course-VM slots
	streamNote  = 5 << 20 // short-notice exceptions (one stream for the pool)
	streamSlrm  = 6 << 20 // reservations.go: the Slurm job stream
	streamNoise = 7 << 20 // + host index (sim.go: the slowdown estimate's noise)
)

const (
	minute = 60
	hour   = 3600
	day    = 86400
)

// Params are the model's parameters (see the comment block above for their meaning and
// defaults). Durations are Go duration text in JSON.
type Params struct {
	Hosts    int       `json:"hosts"`
	RoomSize int       `json:"roomSize"`
	Cores    int       `json:"cores"`
	Start    time.Time `json:"start"` // a Monday 00:00
	Days     int       `json:"days"`

	SlotStarts        []model.Duration `json:"slotStarts"` // time of day
	SlotLength        model.Duration   `json:"slotLength"`
	LectureProb       float64          `json:"lectureProb"`
	SeatProb          float64          `json:"seatProb"`
	LectureLate       model.Duration   `json:"lectureLate"`
	LectureActiveMean model.Duration   `json:"lectureActiveMean"`
	LectureIdleMean   model.Duration   `json:"lectureIdleMean"`
	LectureIdleMax    model.Duration   `json:"lectureIdleMax"`

	WalkInRate    [24]float64    `json:"walkInRate"` // arrivals per room and hour, by hour of day, weekdays
	WeekendFactor float64        `json:"weekendFactor"`
	SessionMedian model.Duration `json:"sessionMedian"`
	SessionSigma  float64        `json:"sessionSigma"`
	SessionMin    model.Duration `json:"sessionMin"`
	SessionMax    model.Duration `json:"sessionMax"`
	ActiveMean    model.Duration `json:"activeMean"`
	IdleMean      model.Duration `json:"idleMean"`
	LongIdleProb  float64        `json:"longIdleProb"`
	LongIdleMin   model.Duration `json:"longIdleMin"`
	LongIdleMean  model.Duration `json:"longIdleMean"`

	SSHPerDay     float64        `json:"sshPerDay"` // per host
	SSHMedian     model.Duration `json:"sshMedian"`
	SSHSigma      float64        `json:"sshSigma"`
	SSHMax        model.Duration `json:"sshMax"`
	SSHActiveMean model.Duration `json:"sshActiveMean"`
	SSHIdleMean   model.Duration `json:"sshIdleMean"`

	LoadProbWalkIn  float64        `json:"loadProbWalkIn"`
	LoadProbLecture float64        `json:"loadProbLecture"`
	LoadProbSSH     float64        `json:"loadProbSSH"`
	LoadMedian      model.Duration `json:"loadMedian"`
	LoadSigma       float64        `json:"loadSigma"`
	LoadCoresMin    float64        `json:"loadCoresMin"`
	LoadCoresMax    float64        `json:"loadCoresMax"`

	ClusterFrom  model.Duration `json:"clusterFrom"`  // time of day cluster mode begins on weekdays
	ClusterUntil model.Duration `json:"clusterUntil"` // time of day it ends

	// Guest-stopping changes (see the model comment); zero: none.
	CourseVMProb      float64        `json:"courseVmProb,omitempty"`
	ShortNoticePerDay float64        `json:"shortNoticePerDay,omitempty"`
	ShortNoticeLead   model.Duration `json:"shortNoticeLead,omitempty"`
}

// DefaultParams are the values documented in the model comment: 200 PCs in rooms of 20,
// one week from Monday 2026-11-23.
func DefaultParams() Params {
	m := func(n int) model.Duration { return model.Duration(time.Duration(n) * time.Minute) }
	var rate [24]float64
	for h := range rate {
		switch {
		case h >= 23 || h < 7:
			rate[h] = 0.05
		case h < 8:
			rate[h] = 0.5
		case h < 10:
			rate[h] = 3
		case h < 16:
			rate[h] = 6
		case h < 19:
			rate[h] = 3
		default:
			rate[h] = 1
		}
	}
	return Params{
		Hosts: 200, RoomSize: 20, Cores: 4,
		Start: time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), Days: 7,

		SlotStarts:  []model.Duration{m(8*60 + 15), m(10*60 + 15), m(12*60 + 15), m(14*60 + 15), m(16*60 + 15)},
		SlotLength:  m(105),
		LectureProb: 0.6, SeatProb: 0.85, LectureLate: m(10),
		LectureActiveMean: m(4), LectureIdleMean: m(1), LectureIdleMax: m(4),

		WalkInRate: rate, WeekendFactor: 0.3,
		SessionMedian: m(45), SessionSigma: 0.75, SessionMin: m(2), SessionMax: m(6 * 60),
		ActiveMean: m(3), IdleMean: m(2), LongIdleProb: 0.1, LongIdleMin: m(10), LongIdleMean: m(10),

		SSHPerDay: 0.2, SSHMedian: m(20), SSHSigma: 1, SSHMax: m(4 * 60), SSHActiveMean: m(2), SSHIdleMean: m(3),

		LoadProbWalkIn: 0.3, LoadProbLecture: 0.2, LoadProbSSH: 0.3,
		LoadMedian: m(5), LoadSigma: 0.7, LoadCoresMin: 1, LoadCoresMax: 2,

		ClusterFrom: m(22 * 60), ClusterUntil: m(7 * 60),
	}
}

// ReservationParams is the week of the reservations benchmark: DefaultParams plus
// guest-stopping changes, a third of the booked lecture slots in course VMs and about
// one short-notice exception a weekday, added 30 minutes ahead.
func ReservationParams() Params {
	p := DefaultParams()
	p.CourseVMProb = 0.35
	p.ShortNoticePerDay = 1
	p.ShortNoticeLead = model.Duration(30 * time.Minute)
	return p
}

// Validate reports parameters the generator cannot use.
func (p Params) Validate() error {
	switch {
	case p.Hosts < 1 || p.Hosts > 100000:
		return fmt.Errorf("hosts %d out of range (1-100000)", p.Hosts)
	case p.RoomSize < 1:
		return fmt.Errorf("roomSize %d must be positive", p.RoomSize)
	case p.Cores < 1:
		return fmt.Errorf("cores %d must be positive", p.Cores)
	case p.Days < 1 || p.Days > 366:
		return fmt.Errorf("days %d out of range (1-366)", p.Days)
	case p.SlotLength <= 0 || p.SessionMedian <= 0 || p.ActiveMean <= 0 || p.IdleMean <= 0 ||
		p.LectureActiveMean <= 0 || p.LectureIdleMean <= 0 || p.SSHActiveMean <= 0 || p.SSHIdleMean <= 0:
		return errors.New("slot, session, active and idle durations must be positive")
	case p.LoadCoresMax < p.LoadCoresMin:
		return errors.New("loadCoresMax below loadCoresMin")
	case p.CourseVMProb < 0 || p.CourseVMProb > 1 || p.ShortNoticePerDay < 0 || p.ShortNoticeLead < 0:
		return errors.New("courseVmProb must be in [0, 1], shortNoticePerDay and shortNoticeLead not negative")
	}
	return nil
}

// Interval is [Start, End) in seconds since the trace's start.
type Interval struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Load is a desktop CPU load episode: Cores cores busy outside the guest in [Start, End).
type Load struct {
	Start int64   `json:"start"`
	End   int64   `json:"end"`
	Cores float64 `json:"cores"`
}

// SessionKind says how a session came about.
type SessionKind string

const (
	SessionLecture SessionKind = "lecture" // a student in a booked slot (local)
	SessionWalkIn  SessionKind = "walk-in" // a student outside lectures (local)
	SessionSSH     SessionKind = "ssh"     // a remote login
)

// Session is one login on a host: [Start, End), the bursts of input in it (input events
// continuously within each burst; none between) and its desktop load episodes.
type Session struct {
	Kind  SessionKind `json:"kind"`
	Start int64       `json:"start"`
	End   int64       `json:"end"`
	Input []Interval  `json:"input"`
	Load  []Load      `json:"load,omitempty"`
}

// Remote reports whether the session is remote (ssh) rather than at the desk.
func (s Session) Remote() bool { return s.Kind == SessionSSH }

// Room is a room's timetable: the booked lecture slots (desktop mode regardless of the
// schedule), and the windows in which the compute guest is stopped.
type Room struct {
	Name     string     `json:"name"`
	Lectures []Interval `json:"lectures"`
	Stops    []Stop     `json:"stops,omitempty"` // ordered by start, not overlapping
}

// StopKind says why a room's guests are stopped.
type StopKind string

const (
	StopCourseVM    StopKind = "course-vm"    // a lecture slot in a course VM, in the timetable
	StopShortNotice StopKind = "short-notice" // an exception added at short notice
)

// Stop is a window [Start, End) in which a room's PCs run a mode without the compute guest
// (course VM, exam, local disk, maintenance). Announced is when it entered the schedule
// (seconds since the trace's start; negative: before the trace).
type Stop struct {
	Kind      StopKind `json:"kind"`
	Start     int64    `json:"start"`
	End       int64    `json:"end"`
	Announced int64    `json:"announced"`
}

// Host is one PC's week: its sessions ordered by start.
type Host struct {
	Name     string    `json:"name"`
	Room     int       `json:"room"` // index into Trace.Rooms
	Sessions []Session `json:"sessions"`
}

// Trace is a generated pool week: what the JSON file holds.
type Trace struct {
	Format string `json:"format"`
	Seed   uint64 `json:"seed"`
	Params Params `json:"params"`
	Length int64  `json:"length"` // seconds
	// Cluster lists the schedule's cluster-mode (after-hours) windows; outside them, and
	// in a room's lecture slots, the pool is in desktop mode.
	Cluster []Interval `json:"cluster"`
	Rooms   []Room     `json:"rooms"`
	Hosts   []Host     `json:"hosts"`
}

// Generate builds the pool week of parameters p from seed. The same (p, seed) gives the
// same trace, byte for byte once encoded.
func Generate(p Params, seed uint64) (*Trace, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	g := gen{p: p, length: int64(p.Days) * day}
	tr := &Trace{Format: TraceFormat, Seed: seed, Params: p, Length: g.length, Cluster: g.clusterWindows()}
	nrooms := (p.Hosts + p.RoomSize - 1) / p.RoomSize
	tr.Hosts = make([]Host, p.Hosts)
	for r := range nrooms {
		room := Room{Name: fmt.Sprintf("r%02d", r+1)}
		first, last := r*p.RoomSize, min((r+1)*p.RoomSize, p.Hosts)
		for h := first; h < last; h++ {
			tr.Hosts[h] = Host{Name: fmt.Sprintf("pc-%s-%02d", room.Name, h-first+1), Room: r}
		}
		g.room(seed, r, &room, tr.Hosts[first:last])
		tr.Rooms = append(tr.Rooms, room)
	}
	g.stops(seed, tr)
	for h := range tr.Hosts {
		g.ssh(seed, h, &tr.Hosts[h])
		slices.SortStableFunc(tr.Hosts[h].Sessions, func(a, b Session) int { return cmpInt(a.Start, b.Start) })
	}
	return tr, nil
}

type gen struct {
	p      Params
	length int64
	rng    *rand.Rand
}

func sec(d model.Duration) int64 { return int64(time.Duration(d) / time.Second) }

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// weekend reports whether day d (0 = the trace's first day) is a Saturday or Sunday.
func (g *gen) weekend(d int) bool {
	wd := g.p.Start.AddDate(0, 0, d).Weekday()
	return wd == time.Saturday || wd == time.Sunday
}

// clusterWindows is the schedule: cluster mode from ClusterFrom to ClusterUntil on
// weekdays and all day at weekends, as merged intervals.
func (g *gen) clusterWindows() []Interval {
	from, until := sec(g.p.ClusterFrom), sec(g.p.ClusterUntil)
	in := func(t int64) bool {
		d := int(t / day)
		tod := t % day
		if g.weekend(d) {
			return true
		}
		if from > until { // across midnight (the default)
			return tod >= from || tod < until
		}
		return tod >= from && tod < until
	}
	// The predicate changes only at midnights and at from/until; test each piece.
	var cuts []int64
	for d := int64(0); d <= int64(g.p.Days); d++ {
		cuts = append(cuts, d*day, d*day+min(from, day), d*day+min(until, day))
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var out []Interval
	for i := 0; i+1 < len(cuts); i++ {
		a, b := cuts[i], min(cuts[i+1], g.length)
		if a >= b || !in(a) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].End == a {
			out[n-1].End = b
		} else {
			out = append(out, Interval{a, b})
		}
	}
	return out
}

// room generates a room's timetable, its lecture sessions and its walk-ins.
func (g *gen) room(seed uint64, r int, room *Room, hosts []Host) {
	p := g.p
	g.rng = rand.New(rand.NewPCG(seed, streamRoom+uint64(r)))
	slot := sec(p.SlotLength)
	for d := range p.Days {
		if g.weekend(d) {
			continue
		}
		for _, s := range p.SlotStarts {
			start := int64(d)*day + sec(s)
			if g.rng.Float64() < p.LectureProb && start+slot <= g.length {
				room.Lectures = append(room.Lectures, Interval{start, start + slot})
			}
		}
	}
	late := sec(p.LectureLate)
	for _, l := range room.Lectures {
		for h := range hosts {
			if g.rng.Float64() >= p.SeatProb {
				continue
			}
			s := Session{Kind: SessionLecture, Start: l.Start + g.uniform(late), End: l.End - g.uniform(late)}
			s.Input = g.bursts(s.Start, s.End, p.LectureActiveMean, p.LectureIdleMean, p.LectureIdleMax, 0)
			g.load(&s, p.LoadProbLecture)
			hosts[h].Sessions = append(hosts[h].Sessions, s)
		}
	}

	// Walk-ins, in arrival order, each onto a free PC.
	busyUntil := make([]int64, len(hosts))
	free := make([]int, 0, len(hosts))
	for hr := range int64(p.Days) * 24 {
		rate := p.WalkInRate[hr%24]
		if g.weekend(int(hr / 24)) {
			rate *= p.WeekendFactor
		}
		n := g.poisson(rate)
		arrivals := make([]int64, n)
		for i := range arrivals {
			arrivals[i] = hr*hour + g.rng.Int64N(hour)
		}
		slices.Sort(arrivals)
		for _, a := range arrivals {
			next := g.length // the room's next lecture start
			booked := false
			for _, l := range room.Lectures {
				if a >= l.Start && a < l.End {
					booked = true
					break
				}
				if l.Start > a {
					next = l.Start
					break
				}
			}
			if booked {
				continue
			}
			free = free[:0]
			for h := range hosts {
				if busyUntil[h] <= a {
					free = append(free, h)
				}
			}
			if len(free) == 0 {
				continue
			}
			h := free[g.rng.IntN(len(free))]
			dur := g.lognormal(p.SessionMedian, p.SessionSigma, sec(p.SessionMin), sec(p.SessionMax))
			s := Session{Kind: SessionWalkIn, Start: a, End: min(a+dur, next)}
			if s.End-s.Start < minute {
				continue
			}
			s.Input = g.bursts(s.Start, s.End, p.ActiveMean, p.IdleMean, 0, p.LongIdleProb)
			g.load(&s, p.LoadProbWalkIn)
			hosts[h].Sessions = append(hosts[h].Sessions, s)
			busyUntil[h] = s.End
		}
	}
}

// stops generates the guest-stopping changes: course-VM lecture slots per room (their own
// stream per room), then the pool's short-notice exceptions (one stream), in free slots.
func (g *gen) stops(seed uint64, tr *Trace) {
	p := g.p
	if p.CourseVMProb > 0 {
		for r := range tr.Rooms {
			g.rng = rand.New(rand.NewPCG(seed, streamStop+uint64(r)))
			for _, l := range tr.Rooms[r].Lectures {
				if g.rng.Float64() < p.CourseVMProb {
					tr.Rooms[r].Stops = append(tr.Rooms[r].Stops, Stop{Kind: StopCourseVM, Start: l.Start, End: l.End, Announced: l.Start - 14*day})
				}
			}
		}
	}
	if p.ShortNoticePerDay <= 0 || len(tr.Rooms) == 0 {
		return
	}
	g.rng = rand.New(rand.NewPCG(seed, streamNote))
	slot, lead := sec(p.SlotLength), sec(p.ShortNoticeLead)
	for d := range p.Days {
		if g.weekend(d) {
			continue
		}
		for range g.poisson(p.ShortNoticePerDay) {
			r := g.rng.IntN(len(tr.Rooms))
			room := &tr.Rooms[r]
			var free []int64
			for _, s := range p.SlotStarts {
				start := int64(d)*day + sec(s)
				busy := start+slot > g.length
				for _, l := range room.Lectures {
					busy = busy || (l.Start < start+slot && start < l.End)
				}
				for _, st := range room.Stops {
					busy = busy || (st.Start < start+slot && start < st.End)
				}
				if !busy {
					free = append(free, start)
				}
			}
			if len(free) == 0 {
				continue
			}
			start := free[g.rng.IntN(len(free))]
			room.Stops = append(room.Stops, Stop{Kind: StopShortNotice, Start: start, End: start + slot, Announced: start - lead})
		}
	}
	for r := range tr.Rooms {
		slices.SortFunc(tr.Rooms[r].Stops, func(a, b Stop) int { return cmpInt(a.Start, b.Start) })
	}
}

// ssh generates a host's remote logins.
func (g *gen) ssh(seed uint64, h int, host *Host) {
	p := g.p
	if p.SSHPerDay <= 0 {
		return
	}
	g.rng = rand.New(rand.NewPCG(seed, streamSSH+uint64(h)))
	mean := float64(day) / p.SSHPerDay
	for t := int64(g.rng.ExpFloat64() * mean); t < g.length; t += max(1, int64(g.rng.ExpFloat64()*mean)) {
		dur := g.lognormal(p.SSHMedian, p.SSHSigma, minute, sec(p.SSHMax))
		s := Session{Kind: SessionSSH, Start: t, End: min(t+dur, g.length)}
		s.Input = g.bursts(s.Start, s.End, p.SSHActiveMean, p.SSHIdleMean, 0, 0)
		g.load(&s, p.LoadProbSSH)
		host.Sessions = append(host.Sessions, s)
	}
}

// bursts alternates active and idle periods over [start, end), starting active (a login
// is input). idleMax > 0 cuts idle gaps; longProb is the chance of a long gap.
func (g *gen) bursts(start, end int64, activeMean, idleMean, idleMax model.Duration, longProb float64) []Interval {
	var out []Interval
	for t := start; t < end; {
		a := max(1, int64(math.Round(g.rng.ExpFloat64()*float64(sec(activeMean)))))
		out = append(out, Interval{t, min(t+a, end)})
		t += a
		var gap int64
		if longProb > 0 && g.rng.Float64() < longProb {
			gap = sec(g.p.LongIdleMin) + int64(math.Round(g.rng.ExpFloat64()*float64(sec(g.p.LongIdleMean))))
		} else {
			gap = int64(math.Round(g.rng.ExpFloat64() * float64(sec(idleMean))))
		}
		if idleMax > 0 {
			gap = min(gap, sec(idleMax))
		}
		t += max(1, gap)
	}
	return out
}

// load adds a desktop load episode to s with probability prob.
func (g *gen) load(s *Session, prob float64) {
	if g.rng.Float64() >= prob {
		return
	}
	p := g.p
	start := s.Start + g.uniform(s.End-s.Start)
	dur := g.lognormal(p.LoadMedian, p.LoadSigma, minute, math.MaxInt64)
	cores := p.LoadCoresMin + g.rng.Float64()*(p.LoadCoresMax-p.LoadCoresMin)
	if end := min(start+dur, s.End); end > start {
		s.Load = append(s.Load, Load{Start: start, End: end, Cores: math.Round(cores*100) / 100})
	}
}

func (g *gen) uniform(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return g.rng.Int64N(n)
}

// lognormal draws seconds with the given median and sigma, clamped to [lo, hi].
func (g *gen) lognormal(median model.Duration, sigma float64, lo, hi int64) int64 {
	v := math.Exp(math.Log(float64(sec(median))) + sigma*g.rng.NormFloat64())
	if v >= float64(hi) {
		return hi
	}
	return max(lo, int64(math.Round(v)))
}

// poisson draws a Poisson count (Knuth's method: the rates here are small).
func (g *gen) poisson(lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	l, k, prod := math.Exp(-lambda), 0, g.rng.Float64()
	for prod > l {
		k++
		prod *= g.rng.Float64()
	}
	return k
}

// WriteTrace encodes the trace as JSON, one host per line, so that diffs of a published
// trace stay readable.
func WriteTrace(w io.Writer, tr *Trace) error {
	head := *tr
	head.Hosts = nil
	hb, err := json.Marshal(head)
	if err != nil {
		return err
	}
	// Splice the hosts in as the last field, one per line.
	tail := []byte(`,"hosts":null}`)
	if !bytes.HasSuffix(hb, tail) {
		return errors.New("trace encoding: hosts is not the last field")
	}
	if _, err := fmt.Fprintf(w, "%s,\"hosts\":[\n", hb[:len(hb)-len(tail)]); err != nil {
		return err
	}
	for i, h := range tr.Hosts {
		b, err := json.Marshal(h)
		if err != nil {
			return err
		}
		sep := ",\n"
		if i == len(tr.Hosts)-1 {
			sep = "\n"
		}
		if _, err := fmt.Fprintf(w, "%s%s", b, sep); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, "]}\n")
	return err
}

// ReadTrace decodes a trace written by WriteTrace (or any JSON of the same layout).
func ReadTrace(r io.Reader) (*Trace, error) {
	var tr Trace
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tr); err != nil {
		return nil, err
	}
	if tr.Format != TraceFormat {
		return nil, fmt.Errorf("trace format %q, want %q", tr.Format, TraceFormat)
	}
	if err := tr.Params.Validate(); err != nil {
		return nil, err
	}
	if tr.Length <= 0 {
		return nil, fmt.Errorf("trace length %d: must be positive", tr.Length)
	}
	for i, h := range tr.Hosts {
		if h.Room < 0 || h.Room >= len(tr.Rooms) {
			return nil, fmt.Errorf("host %d (%s): room %d out of range", i, h.Name, h.Room)
		}
	}
	return &tr, nil
}

// writeTraceFile writes the trace to path.
func writeTraceFile(path string, tr *Trace) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteTrace(f, tr); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
