package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

var resDepths = flag.String("depths", "100,500,2000,10000", "bf_max_job_test values of the reservations benchmark's sensitivity table")

// fixedJobs is a job stream of identical jobs: runtime rt at full speed, the limit rt/use
// rounded up to the usual values, checkpointing with probability ckpt.
func fixedJobs(rt time.Duration, use, ckpt float64) SlurmOptions {
	o := DefaultSlurmOptions()
	o.Classes = []JobClass{{Name: "fixed", Weight: 1, Median: model.Duration(rt), Sigma: 0, Max: model.Duration(rt), CheckpointProb: ckpt}}
	o.Use = [2]float64{use, use}
	return o
}

// one host, nobody at it: its guest runs at full speed (4 cores) all the time, except in
// the room's stops.
func stopTrace(length int64, stops ...Stop) *Trace {
	tr := handTrace(length, nil)
	tr.Rooms[0].Stops = stops
	return tr
}

func byVariant(rs []SlurmResult) map[string]SlurmResult {
	m := map[string]SlurmResult{}
	for _, r := range rs {
		m[r.Variant] = r
	}
	return m
}

// Jobs of 3 h with an 8 h limit (3 h is 0.5 of the 6 h asked for, rounded up to 8 h) and a
// course-VM slot 10:00-12:00 in the timetable: with reservations the job due at 03:00
// would end its limit at 11:00, inside the slot, so it is not started and the node idles
// until the slot ends; without, it runs and the third job (started 09:00) is requeued at
// 10:00 with an hour of work lost.
func TestReservationKeepsJobsOffAKnownStop(t *testing.T) {
	tr := stopTrace(16*hour, Stop{Kind: StopCourseVM, Start: 10 * hour, End: 12 * hour, Announced: -14 * day})
	res := byVariant(SimulateSlurm(tr, OvertimeDefault(), Variants(), fixedJobs(3*time.Hour, 0.5, 0), nil))
	today, resv := res["no reservations (today)"], res["reservations"]
	if today.RequeuedKnown != 1 || !near(today.WastedKnown, 4) || today.IdleCPUHours != 0 {
		t.Errorf("today: requeued %d, wasted %.3f CPU-h, idle %.3f: want 1, 4 (1 h on 4 cores), 0", today.RequeuedKnown, today.WastedKnown, today.IdleCPUHours)
	}
	// 00-03 job 1; 03-10 idle (nothing fits before 10:00); 12-15 job 2, 15-16 job 3.
	if resv.RequeuedKnown != 0 || resv.WastedCPUHours != 0 || !near(resv.IdleCPUHours, 7*4) || resv.JobsCompleted != 2 {
		t.Errorf("reservations: requeued %d, wasted %.3f, idle %.3f CPU-h, completed %d: want 0, 0, 28, 2",
			resv.RequeuedKnown, resv.WastedCPUHours, resv.IdleCPUHours, resv.JobsCompleted)
	}
	if !near(resv.DeliveredCPUHours+resv.IdleCPUHours, 14*4) || !near(today.DeliveredCPUHours, 14*4) {
		t.Errorf("delivered %.3f + idle %.3f, today %.3f: want the 14 h outside the slot on 4 cores", resv.DeliveredCPUHours, resv.IdleCPUHours, today.DeliveredCPUHours)
	}
}

// A reservation that is not visible yet (beyond the horizon) does not block a start.
func TestReservationHorizon(t *testing.T) {
	// Jobs of 6 h with an 8 h limit; the slot at 10:00.
	o := fixedJobs(6*time.Hour, 0.75, 0)
	tr := stopTrace(16*hour, Stop{Kind: StopCourseVM, Start: 10 * hour, End: 12 * hour, Announced: -14 * day})
	if r := byVariant(SimulateSlurm(tr, OvertimeDefault(), Variants()[1:2], o, nil))["reservations"]; r.RequeuedKnown != 0 {
		t.Errorf("requeued %d with the stop within the 7-day horizon, want 0", r.RequeuedKnown)
	}
	// At 06:00 the slot is 4 h away, beyond a 3 h horizon: the job starts and runs into it.
	o.Horizon = model.Duration(3 * time.Hour)
	if r := byVariant(SimulateSlurm(tr, OvertimeDefault(), Variants()[1:2], o, nil))["reservations"]; r.RequeuedKnown != 1 {
		t.Errorf("requeued %d with the stop beyond the horizon, want 1", r.RequeuedKnown)
	}
}

// A short-notice stop at 10:00, added at 09:30, hits the job started at 08:00 (4 h runtime,
// 8 h limit). With signals it is warned at 09:50 (10 min lead), checkpoints the 1 h 50 min
// done, is requeued at 10:00 losing 10 min, and resumes at 12:00 from the checkpoint.
// Without signals the 2 h are lost.
func TestShortNoticeSignalsThenRequeues(t *testing.T) {
	tr := stopTrace(16*hour, Stop{Kind: StopShortNotice, Start: 10 * hour, End: 12 * hour, Announced: 10*hour - 30*minute})
	res := byVariant(SimulateSlurm(tr, OvertimeDefault(), Variants(), fixedJobs(4*time.Hour, 0.5, 1), nil))
	for _, name := range []string{"no reservations (today)", "reservations"} {
		r := res[name]
		if r.RequeuedShort != 1 || r.Signalled != 0 || !near(r.WastedShort, 8) {
			t.Errorf("%s: requeued %d, signalled %d, wasted %.3f CPU-h: want 1, 0, 8", name, r.RequeuedShort, r.Signalled, r.WastedShort)
		}
	}
	r := res["reservations + signals"]
	if r.RequeuedShort != 1 || r.Signalled != 1 || r.Resumed != 1 || !near(r.WastedShort, 4*10.0/60) {
		t.Errorf("signals: requeued %d, signalled %d, resumed %d, wasted %.3f CPU-h: want 1, 1, 1, %.3f", r.RequeuedShort, r.Signalled, r.Resumed, r.WastedShort, 4*10.0/60)
	}
	// 00-04, 04-08 complete; the third resumes at 12:00 with 2 h 10 min left: done 14:10;
	// the fourth runs 14:10-16:00.
	if r.JobsCompleted != 3 || r.RunningAtEnd != 1 {
		t.Errorf("signals: completed %d, running at end %d: want 3 and 1", r.JobsCompleted, r.RunningAtEnd)
	}
	// A job that does not checkpoint gets the signal and loses everything.
	nc := byVariant(SimulateSlurm(tr, OvertimeDefault(), Variants()[2:], fixedJobs(4*time.Hour, 0.5, 0), nil))["reservations + signals"]
	if nc.Signalled != 1 || nc.Resumed != 0 || !near(nc.WastedShort, 8) {
		t.Errorf("no checkpoint: signalled %d, resumed %d, wasted %.3f: want 1, 0, 8", nc.Signalled, nc.Resumed, nc.WastedShort)
	}
}

// Slurm kills a job at its time limit: a throttled job that would outrun it times out
// before the reservation instead of being requeued by it.
func TestTimeLimitBeforeReservation(t *testing.T) {
	// Someone works 01:00-09:00 (input throughout): the guest is throttled to 1 core. A job of
	// 3 h at full speed (limit 8 h) started at 00:00 gets 1 h at 4 cores, then 1 core: it
	// needs 12 core-h, has 4 + 7 = 11 by 08:00, and is killed at its limit.
	tr := stopTrace(16*hour, Stop{Kind: StopCourseVM, Start: 9 * hour, End: 12 * hour, Announced: -14 * day})
	tr.Hosts[0].Sessions = []Session{walkIn(hour, 9*hour, Interval{hour, 9 * hour})}
	r := byVariant(SimulateSlurm(tr, OvertimeDefault(), Variants()[1:2], fixedJobs(3*time.Hour, 0.5, 0), nil))["reservations"]
	if r.TimedOut != 1 || r.RequeuedKnown != 0 || !near(r.WastedTimeout, 11) {
		t.Errorf("timed out %d, requeued %d, wasted %.3f CPU-h: want 1, 0, 11", r.TimedOut, r.RequeuedKnown, r.WastedTimeout)
	}
}

// The guest's rate is stopped in a room's stop windows, and only there.
func TestMaskStops(t *testing.T) {
	in := []rateSeg{{0, 4, true, -1}, {100, 1, true, -1}, {300, 4, true, -1}}
	got := maskStops(in, []Stop{{Start: 50, End: 150}, {Start: 300, End: 400}}, 1000)
	want := []rateSeg{{0, 4, true, -1}, {50, 0, false, 0}, {150, 1, true, -1}, {300, 0, false, 1}, {400, 4, true, -1}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// The reservation week: course-VM stops are booked lecture slots known two weeks ahead,
// short-notice ones lie in free slots and are announced 30 min ahead; the published
// harvest week (DefaultParams) has none.
func TestGenerateStops(t *testing.T) {
	if tr := generate(t, DefaultParams(), 1); func() bool {
		for _, r := range tr.Rooms {
			if len(r.Stops) > 0 {
				return true
			}
		}
		return false
	}() {
		t.Fatal("the default week has stops")
	}
	tr := generate(t, ReservationParams(), 1)
	var course, short, lectures int
	for _, r := range tr.Rooms {
		lectures += len(r.Lectures)
		for i, s := range r.Stops {
			if i > 0 && s.Start < r.Stops[i-1].End {
				t.Fatalf("%s: stops overlap: %+v", r.Name, r.Stops)
			}
			booked := false
			for _, l := range r.Lectures {
				booked = booked || (l.Start == s.Start && l.End == s.End)
			}
			switch s.Kind {
			case StopCourseVM:
				course++
				if !booked || s.Announced != s.Start-14*day {
					t.Errorf("%s: course-VM stop %+v not a booked slot known ahead", r.Name, s)
				}
			case StopShortNotice:
				short++
				if booked || s.Announced != s.Start-30*minute {
					t.Errorf("%s: short-notice stop %+v in a booked slot or not 30 min ahead", r.Name, s)
				}
			}
		}
	}
	if f := float64(course) / float64(lectures); f < 0.25 || f > 0.45 || short < 1 || short > 12 {
		t.Errorf("%d course-VM stops of %d lectures, %d short-notice", course, lectures, short)
	}
}

// The pool week: reservations leave no job requeued by a known stop; the job stream is the
// same in every variant.
func TestReservationsPoolWeek(t *testing.T) {
	tr := generate(t, ReservationParams(), 2)
	rs := SimulateSlurm(tr, OvertimeDefault(), Variants(), DefaultSlurmOptions(), nil)
	today := rs[0]
	if today.RequeuedKnown == 0 || today.IdleCPUHours != 0 {
		t.Errorf("today: %d requeued by known stops, %.0f idle CPU-h", today.RequeuedKnown, today.IdleCPUHours)
	}
	for _, r := range rs[1:] {
		if r.RequeuedKnown != 0 || r.WastedKnown != 0 || r.RequeuedOther != 0 {
			t.Errorf("%s: %d requeued by known stops (%.0f CPU-h), %d other", r.Variant, r.RequeuedKnown, r.WastedKnown, r.RequeuedOther)
		}
		if math.Abs(r.UsefulCPUHours-(r.DeliveredCPUHours-r.WastedCPUHours)) > 1e-6 || r.WastedCPUHours > r.DeliveredCPUHours {
			t.Errorf("%s: inconsistent CPU-hours %+v", r.Variant, r)
		}
	}
	if s := rs[2]; s.Signalled == 0 || s.WastedShort > rs[1].WastedShort {
		t.Errorf("signals: %d signalled, %.0f CPU-h lost to short-notice stops vs %.0f without", s.Signalled, s.WastedShort, rs[1].WastedShort)
	}
}

// BenchmarkReservations publishes the comparison: the reservation week of seeds
// 1..-seeds through one Slurm queue, overtime-default, three variants, and the backfill
// depths of -depths. Run by:
//
//	go test -run '^$' -bench Reservations -benchtime 1x ./test/bench/harvest -args -out docs/benchmarks
func BenchmarkReservations(b *testing.B) {
	depths, err := intsFlag(*resDepths)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	rb, err := runResBench(*seeds, depths)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(*seeds), "s/week")
	var names []string
	var rows []map[string]Spread
	for _, s := range rb.Summary {
		names, rows = append(names, s.Name), append(rows, s.Metrics)
	}
	b.Logf("seeds 1-%d, median (min-max):\n%s", *seeds, resTable(names, rows, "variant"))
	if *out != "" {
		if err := rb.write(*out); err != nil {
			b.Fatal(err)
		}
	}
}

func intsFlag(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-depths: bad value %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
