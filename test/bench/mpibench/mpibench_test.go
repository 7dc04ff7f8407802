// Package mpibench measures MPI point-to-point latency and bandwidth between two Overtime
// compute guests and within one guest, against the same two ranks run directly on the
// host, in one run, so that the ratios compare measurements taken side by side.
//
// Real: a Slurm lab (internal/testenv/slurmlab: slurmctld, munged, the site manager, one
// `overtime-agent run` per desktop with the container backend) with two hosts, mb1 and
// mb2, whose guests carry Open MPI and PMIx (Options.MPI); the program is
// testdata/pingpong.c compiled with this machine's mpicc. Placements:
//
//	guests     rank 0 in mb1's guest, rank 1 in mb2's (srun --mpi=pmix -N2 -n2
//	           --ntasks-per-node=1): TCP over the lab's bridge (veth, bridge, veth)
//	host-tcp   both ranks on the host (mpirun), btl self,tcp over loopback
//	guest-shm  both ranks in mb1's guest (srun -N1 -n2): shared memory (vader, CMA)
//	host-shm   both ranks on the host, btl self,vader with CMA
//
// and, with -controls, host-tcp-idle and host-shm-idle: the host's ranks under
// `chrt --idle 0 nice -n 19`, the scheduling class the guest's ranks get from the
// Overtime SPANK plugin (tasks=idle) inside a guest that itself runs in an idle-class
// cgroup: they split a guests/host ratio into the cost of the container and of the
// class. Every round runs each placement once, in a shuffled order, after one warm-up
// round that is not counted.
//
//	go test -count=1 -timeout 40m -run '^$' -bench MPI -benchtime 1x ./test/bench/mpibench -args -out DIR
package mpibench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
	"github.com/overtime-hpc/overtime/node-agent/cgroup"
)

var (
	out       = flag.String("out", "", "directory for jobs.json and jobs.md (empty: only log)")
	rounds    = flag.Int("rounds", 25, "measured rounds; each runs every placement once, in a shuffled order")
	latWarmup = flag.Int("lat-warmup", 2000, "8-byte round trips before the timed ones")
	latIters  = flag.Int("lat-iters", 30000, "timed 8-byte round trips per run")
	bwWarmup  = flag.Int("bw-warmup", 3, "bandwidth windows before the timed ones")
	bwWindows = flag.Int("bw-windows", 100, "timed bandwidth windows per run")
	window    = flag.Int("window", 16, "messages in flight per bandwidth window")
	msgBytes  = flag.Int("bytes", 1<<20, "bandwidth message size")
	controls  = flag.Bool("controls", true, "also run the host placements in the guests' scheduling class (idle, nice 19)")
	seed      = flag.Int64("seed", 1, "seed of the rounds' shuffled orders")
	budget    = flag.Duration("budget", 15*time.Minute, "start no round after this much time (counted from the benchmark's start) once 5 rounds are done")
)

// Hosts of the lab: only these names (other labs on the machine kill guests by host name).
const (
	host1, host2 = "mb1", "mb2"
	labNet       = "10.31.0.0/24" // slurmlab's bridge
)

// placement is where the two ranks run and which transport carries their messages.
type placement struct {
	Name      string `json:"name"`
	Where     string `json:"where"`
	Transport string `json:"transport"`
	guest     bool
	nodes     string // srun -w
	srunArgs  []string
	btl       string
	idle      bool // host ranks under chrt --idle 0 nice -n 19
	control   bool
}

var placements = []placement{
	{Name: "guests", Where: "rank 0 in mb1's guest, rank 1 in mb2's guest (srun --mpi=pmix -N2 -n2 --ntasks-per-node=1)",
		Transport: "TCP over the lab bridge (btl self,tcp; " + labNet + ")", guest: true, nodes: host1 + "," + host2,
		// -m arbitrary: task i on the i-th node of -w (the nodes' own order is that of
		// their registration, which either guest may win).
		srunArgs: []string{"-N2", "-n2", "--ntasks-per-node=1", "--distribution=arbitrary"}, btl: "self,tcp"},
	{Name: "host-tcp", Where: "both ranks on the host (mpirun -np 2)", Transport: "TCP over loopback (btl self,tcp; lo)", btl: "self,tcp"},
	{Name: "guest-shm", Where: "both ranks in mb1's guest (srun --mpi=pmix -N1 -n2)", Transport: "shared memory (btl self,vader; CMA)",
		guest: true, nodes: host1, srunArgs: []string{"-N1", "-n2"}, btl: "self,vader"},
	{Name: "host-shm", Where: "both ranks on the host (mpirun -np 2)", Transport: "shared memory (btl self,vader; CMA)", btl: "self,vader"},
	{Name: "host-tcp-idle", Where: "as host-tcp, under chrt --idle 0 nice -n 19 (the guests' task class)",
		Transport: "TCP over loopback (btl self,tcp; lo)", btl: "self,tcp", idle: true, control: true},
	{Name: "host-shm-idle", Where: "as host-shm, under chrt --idle 0 nice -n 19 (the guests' task class)",
		Transport: "shared memory (btl self,vader; CMA)", btl: "self,vader", idle: true, control: true},
}

// ratioPairs: numerator / denominator of the same metric, from the same run.
var ratioPairs = [][2]string{
	{"guests", "host-tcp"},
	{"guest-shm", "host-shm"},
	{"guests", "host-tcp-idle"},
	{"guest-shm", "host-shm-idle"},
	{"host-tcp-idle", "host-tcp"},
	{"host-shm-idle", "host-shm"},
}

type rankInfo struct {
	Rank   int    `json:"rank"`
	Host   string `json:"host"`
	Policy string `json:"policy"`
	Nice   int    `json:"nice"`
	// The CPU at the start and end of the latency loop and the moves in between.
	CPUFirst   int `json:"cpuFirst"`
	CPULast    int `json:"cpuLast"`
	Migrations int `json:"migrations"`
}

// sample is one run of one placement.
type sample struct {
	Round     int        `json:"round"`
	Slot      int        `json:"slot"` // position in the round's order
	Placement string     `json:"placement"`
	WallS     float64    `json:"wallSeconds"` // the whole srun/mpirun, start-up included
	Load1     float64    `json:"loadavg1"`    // the machine's 1-minute load average before the run
	Ranks     []rankInfo `json:"ranks"`
	// From the program (testdata/pingpong.c): per-run latency statistics of the timed
	// round trips (half round trip), bandwidth per window and over all windows.
	LatMedianUs  float64 `json:"latMedianUs"`
	LatMeanUs    float64 `json:"latMeanUs"`
	LatP10Us     float64 `json:"latP10Us"`
	LatP90Us     float64 `json:"latP90Us"`
	LatP99Us     float64 `json:"latP99Us"`
	LatMaxUs     float64 `json:"latMaxUs"`
	BWMedianMBps float64 `json:"bwMedianMBps"`
	BWAggMBps    float64 `json:"bwAggMBps"`
	BWMinMBps    float64 `json:"bwMinMBps"`
	BWMaxMBps    float64 `json:"bwMaxMBps"`
}

// spread is the distribution of one per-run value over the rounds.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Q1     float64 `json:"q1"`
	Q3     float64 `json:"q3"`
	N      int     `json:"n"`
}

type summary struct {
	placement
	Control   bool   `json:"control"`
	LatMedian spread `json:"latMedianUs"` // per-run median half round trip
	LatMean   spread `json:"latMeanUs"`   // per-run mean (OSU's figure)
	LatP99    spread `json:"latP99Us"`
	BWMedian  spread `json:"bwMedianMBps"` // per-run median of the windows
	BWAgg     spread `json:"bwAggMBps"`    // per-run total bytes / total time (OSU's figure)
	// SlowRuns: runs whose 10th-percentile latency is above 1.5 times the lowest of any
	// run over the same transport (a whole run shifted, not a tail).
	SlowRuns int `json:"slowRuns"`
}

// ratio of one metric between two placements: of the medians over the rounds, and
// the per-round ratios (same round: the runs were minutes apart at most).
type ratio struct {
	Num             string    `json:"num"`
	Den             string    `json:"den"`
	Metric          string    `json:"metric"`
	OfMedians       float64   `json:"ofMedians"`
	PerRound        spread    `json:"perRound"`
	PerRoundSamples []float64 `json:"perRoundSamples"`
}

type report struct {
	Date        string              `json:"date"`
	Machine     string              `json:"machine"`
	Kernel      string              `json:"kernel"`
	OpenMPI     string              `json:"openMPI"`
	CPUs        int                 `json:"cpus"`
	Rounds      int                 `json:"rounds"` // measured (the budget may end the run early)
	Seed        int64               `json:"seed"`
	LatWarmup   int                 `json:"latWarmup"`
	LatIters    int                 `json:"latIters"`
	BWWarmup    int                 `json:"bwWarmup"`
	BWWindows   int                 `json:"bwWindows"`
	Window      int                 `json:"window"`
	Bytes       int                 `json:"bytes"`
	GuestCgroup map[string]string   `json:"guestCgroup"` // mb1's guest cgroup's CPU settings on the host
	MTU         map[string]int      `json:"mtu"`         // the lab bridge's and the host's loopback
	Orders      [][]string          `json:"orders"`
	Summaries   []summary           `json:"placements"`
	Ratios      []ratio             `json:"ratios"`
	Samples     []sample            `json:"samples"`
	Env         map[string][]string `json:"mcaEnv"` // per placement
	RunMinutes  float64             `json:"runMinutes"`
}

const policy = "{idleAfter: 6s, hold: 1s, desktopLoad: 100, freezePressure: 100, thawPressure: 99, controller: fixed}"

func BenchmarkMPI(b *testing.B) {
	needs.Servers(b, "mpicc and mpirun (Debian packages openmpi-bin, libopenmpi-dev)", "chrt")
	for _, tool := range []string{"mpicc", "mpirun", "chrt"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s: %v (scripts/deps.sh installs openmpi-bin and libopenmpi-dev)", tool, err)
		}
	}
	if *rounds < 1 || *latIters < 1 || *bwWindows < 1 || *window < 1 || *msgBytes < 16 {
		b.Fatal("bad flags")
	}
	start := time.Now()
	// Compiled before the lab starts, so that a broken program fails at once.
	bin := filepath.Join(b.TempDir(), "pingpong")
	if o, err := exec.Command("mpicc", "-O2", "-Wall", "-o", bin, "testdata/pingpong.c").CombinedOutput(); err != nil {
		b.Fatalf("mpicc: %v\n%s", err, o)
	}
	active := placements
	if !*controls {
		active = slices.DeleteFunc(slices.Clone(placements), func(p placement) bool { return p.control })
	}
	logf("%d placements x (1 warm-up + %d rounds), about %d s of runs after the lab is up", len(active), *rounds, len(active)*(*rounds+1)*3)

	l := slurmlab.Start(b, slurmlab.Options{
		Hosts: []slurmlab.Host{
			{Name: host1, MAC: "52:54:00:1b:00:01", Cluster: true},
			{Name: host2, MAC: "52:54:00:1b:00:02", Cluster: true},
		},
		Policy: policy,
		MPI:    true,
	})
	for _, n := range []string{host1, host2} {
		if !poll.WaitEvery(90*time.Second, 200*time.Millisecond, func() bool { return strings.Contains(l.Node(n)["State"], "IDLE") }) {
			b.Fatalf("%s never IDLE: %v", n, l.Node(n))
		}
	}
	logf("lab up in %s", time.Since(start).Round(time.Second))

	args := []string{strconv.Itoa(*latWarmup), strconv.Itoa(*latIters), strconv.Itoa(*bwWarmup), strconv.Itoa(*bwWindows),
		strconv.Itoa(*window), strconv.Itoa(*msgBytes)}
	hostname, _ := os.Hostname()
	envs := map[string][]string{}
	for _, p := range active {
		envs[p.Name] = mcaEnv(p)
	}
	run := func(p placement, round, slot int) sample {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		var c *exec.Cmd
		if p.guest {
			a := append([]string{"--mpi=pmix", "-w", p.nodes}, p.srunArgs...)
			a = append(a, "--chdir=/tmp", "--bcast=/tmp/pingpong", bin)
			c = l.NS.CommandContext(ctx, "srun", append(a, args...)...)
			c.Env = append(append(os.Environ(), "SLURM_CONF="+l.Conf), envs[p.Name]...)
		} else {
			a := []string{"mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", bin}
			if p.idle {
				a = append([]string{"chrt", "--idle", "0", "nice", "-n", "19"}, a...)
			}
			c = exec.CommandContext(ctx, a[0], append(a[1:], args...)...)
			c.Env = append(os.Environ(), envs[p.Name]...)
		}
		s := sample{Round: round, Slot: slot, Placement: p.Name, Load1: loadavg()}
		at := time.Now()
		o, err := c.CombinedOutput()
		s.WallS = time.Since(at).Seconds()
		text := string(o)
		if err != nil {
			b.Fatalf("%s (round %d): %v\n%s", p.Name, round, err, text)
		}
		if err := parse(text, &s); err != nil {
			b.Fatalf("%s (round %d): %v\n%s", p.Name, round, err, text)
		}
		if err := check(p, s, hostname); err != nil {
			b.Fatalf("%s (round %d): %v\n%s", p.Name, round, err, text)
		}
		return s
	}

	// The guest's CPU settings on the host (the agent's cgroup, as the ranks ran in it),
	// and the MTUs of the two TCP paths.
	guestCg := guestCgroup(host1)
	mtus := map[string]int{
		"labBridge":    mtu(exec.Command("ip", "-n", l.NS.Name, "-o", "link", "show", slurmlab.Bridge).Output()),
		"hostLoopback": mtu(exec.Command("ip", "-o", "link", "show", "lo").Output()),
	}

	rng := rand.New(rand.NewSource(*seed))
	var r report
	measured := 0
	for round := 0; round <= *rounds; round++ { // round 0: warm-up, not counted
		if measured >= 5 && time.Since(start) > *budget {
			logf("budget of %s spent: %d rounds measured", *budget, measured)
			break
		}
		order := slices.Clone(active)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		var names []string
		for slot, p := range order {
			s := run(p, round, slot)
			names = append(names, p.Name)
			logf("round %d %-13s lat median %7.2f us (mean %7.2f, p99 %8.1f)  bw median %7.0f MB/s (agg %7.0f)  %s/%s nice %d  load %.2f  %.1f s",
				round, p.Name, s.LatMedianUs, s.LatMeanUs, s.LatP99Us, s.BWMedianMBps, s.BWAggMBps, s.Ranks[0].Policy, s.Ranks[1].Policy,
				s.Ranks[0].Nice, s.Load1, s.WallS)
			if round > 0 {
				r.Samples = append(r.Samples, s)
			}
		}
		if round > 0 {
			r.Orders = append(r.Orders, names)
			measured++
		}
	}

	r.Date = time.Now().UTC().Format(time.RFC3339)
	r.Machine = fmt.Sprintf("%d-core VM (%s), shared", runtime.NumCPU(), cpuModel())
	r.Kernel = firstLine(exec.Command("uname", "-r").Output())
	r.OpenMPI = firstLine(exec.Command("mpirun", "--version").Output())
	r.CPUs = runtime.NumCPU()
	r.Rounds, r.Seed = measured, *seed
	r.LatWarmup, r.LatIters, r.BWWarmup, r.BWWindows, r.Window, r.Bytes = *latWarmup, *latIters, *bwWarmup, *bwWindows, *window, *msgBytes
	r.GuestCgroup, r.MTU = guestCg, mtus
	r.Env = envs
	for _, p := range active {
		r.Summaries = append(r.Summaries, summarize(p, r.Samples))
	}
	slowRuns(r.Summaries, r.Samples)
	for _, pr := range ratioPairs {
		if !has(active, pr[0]) || !has(active, pr[1]) {
			continue
		}
		for _, m := range []string{"latMedianUs", "bwMedianMBps", "latMeanUs", "bwAggMBps"} {
			r.Ratios = append(r.Ratios, ratioOf(pr[0], pr[1], m, r.Samples))
		}
	}
	r.RunMinutes = time.Since(start).Minutes()
	for _, s := range r.Summaries {
		logf("%-13s latency %6.2f us (%.2f-%.2f)  bandwidth %6.0f MB/s (%.0f-%.0f)", s.Name,
			s.LatMedian.Median, s.LatMedian.Min, s.LatMedian.Max, s.BWMedian.Median, s.BWMedian.Min, s.BWMedian.Max)
	}
	for _, x := range r.Ratios {
		logf("%s/%s %s: %.2f (per round %.2f-%.2f)", x.Num, x.Den, x.Metric, x.OfMedians, x.PerRound.Min, x.PerRound.Max)
	}
	if g := find(r.Ratios, "guests", "host-tcp", "latMedianUs"); g != nil {
		b.ReportMetric(g.OfMedians, "guests/host-tcp-lat")
	}
	if *out == "" {
		return
	}
	js, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "jobs.json"), append(js, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*out, "jobs.md"), []byte(markdown(&r)), 0o644); err != nil {
		b.Fatal(err)
	}
}

// mcaEnv is a placement's Open MPI settings (environment; srun exports it to the tasks).
// Only the named BTLs may carry a message, so a run that completes used them.
func mcaEnv(p placement) []string {
	env := []string{"OMPI_MCA_pml=ob1", "OMPI_MCA_btl=" + p.btl}
	switch {
	case strings.Contains(p.btl, "vader"):
		env = append(env, "OMPI_MCA_btl_vader_single_copy_mechanism=cma")
	case p.guest:
		env = append(env, "OMPI_MCA_btl_tcp_if_include="+labNet)
	default:
		env = append(env, "OMPI_MCA_btl_tcp_if_include=lo")
	}
	if p.guest {
		env = append(env, "TMPDIR=/tmp") // the submitter's TMPDIR would not exist in the guest
	}
	return env
}

var (
	okLine    = regexp.MustCompile(`(?m)^mpibench ok (.*)$`)
	rankLine  = regexp.MustCompile(`(?m)^rank (\d) host (\S+) policy (\S+) nice (-?\d+)$`)
	cpuLine   = regexp.MustCompile(`(?m)^rank (\d) cpu (-?\d+)\.\.(-?\d+) migrations (\d+)$`)
	cmaFailed = regexp.MustCompile(`Read -1, expected \d+, errno`) // vader's CMA get failed (it falls back to a copy)
)

func parse(text string, s *sample) error {
	if strings.Contains(text, "mpibench FAILED") {
		return fmt.Errorf("the program found bad data")
	}
	if cmaFailed.MatchString(text) {
		return fmt.Errorf("vader's CMA get failed")
	}
	m := okLine.FindStringSubmatch(text)
	if m == nil {
		return fmt.Errorf("no \"mpibench ok\" line")
	}
	kv := map[string]float64{}
	for _, f := range strings.Fields(m[1]) {
		k, v, _ := strings.Cut(f, "=")
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s: %v", f, err)
		}
		kv[k] = x
	}
	s.LatMedianUs, s.LatMeanUs, s.LatP10Us, s.LatP90Us = kv["lat_median_us"], kv["lat_mean_us"], kv["lat_p10_us"], kv["lat_p90_us"]
	s.LatP99Us, s.LatMaxUs = kv["lat_p99_us"], kv["lat_max_us"]
	s.BWMedianMBps, s.BWAggMBps, s.BWMinMBps, s.BWMaxMBps = kv["bw_median_MBps"], kv["bw_agg_MBps"], kv["bw_min_MBps"], kv["bw_max_MBps"]
	if s.LatMedianUs <= 0 || s.BWMedianMBps <= 0 {
		return fmt.Errorf("missing values: %q", m[1])
	}
	s.Ranks = make([]rankInfo, 2)
	seen := 0
	for _, rm := range rankLine.FindAllStringSubmatch(text, -1) {
		i, _ := strconv.Atoi(rm[1])
		n, _ := strconv.Atoi(rm[4])
		if i > 1 {
			return fmt.Errorf("rank %d", i)
		}
		s.Ranks[i] = rankInfo{Rank: i, Host: rm[2], Policy: rm[3], Nice: n}
		seen |= 1 << i
	}
	if seen != 3 {
		return fmt.Errorf("rank lines missing")
	}
	for _, cm := range cpuLine.FindAllStringSubmatch(text, -1) {
		i, _ := strconv.Atoi(cm[1])
		if i > 1 {
			return fmt.Errorf("rank %d", i)
		}
		s.Ranks[i].CPUFirst, _ = strconv.Atoi(cm[2])
		s.Ranks[i].CPULast, _ = strconv.Atoi(cm[3])
		s.Ranks[i].Migrations, _ = strconv.Atoi(cm[4])
	}
	return nil
}

// check that the ranks ran where the placement says, in the scheduling class it says.
func check(p placement, s sample, hostname string) error {
	h0, h1 := s.Ranks[0].Host, s.Ranks[1].Host
	switch {
	case p.guest && p.Name == "guests":
		if !strings.Contains(h0, host1) || !strings.Contains(h1, host2) {
			return fmt.Errorf("ranks on %s and %s, want %s's and %s's guests", h0, h1, host1, host2)
		}
	case p.guest:
		if !strings.Contains(h0, host1) || h1 != h0 {
			return fmt.Errorf("ranks on %s and %s, want both in %s's guest", h0, h1, host1)
		}
	default:
		if h0 != hostname || h1 != hostname {
			return fmt.Errorf("ranks on %s and %s, want both on the host %s", h0, h1, hostname)
		}
	}
	for _, ri := range s.Ranks {
		if p.idle && (ri.Policy != "idle" || ri.Nice != 19) {
			return fmt.Errorf("rank %d: %s nice %d, want idle nice 19", ri.Rank, ri.Policy, ri.Nice)
		}
		if !p.guest && !p.idle && (ri.Policy != "other" || ri.Nice != 0) {
			return fmt.Errorf("rank %d: %s nice %d, want other nice 0", ri.Rank, ri.Policy, ri.Nice)
		}
	}
	return nil
}

func value(s sample, metric string) float64 {
	switch metric {
	case "latMedianUs":
		return s.LatMedianUs
	case "latMeanUs":
		return s.LatMeanUs
	case "latP99Us":
		return s.LatP99Us
	case "bwMedianMBps":
		return s.BWMedianMBps
	case "bwAggMBps":
		return s.BWAggMBps
	}
	panic(metric)
}

func values(samples []sample, name, metric string) []float64 {
	var v []float64
	for _, s := range samples {
		if s.Placement == name {
			v = append(v, value(s, metric))
		}
	}
	return v
}

func spreadOf(v []float64) spread {
	s := slices.Clone(v)
	slices.Sort(s)
	return spread{Median: quantile(s, 0.5), Min: s[0], Max: s[len(s)-1], Q1: quantile(s, 0.25), Q3: quantile(s, 0.75), N: len(s)}
}

// quantile of sorted s, linear between order statistics.
func quantile(s []float64, q float64) float64 {
	x := q * float64(len(s)-1)
	i := int(math.Floor(x))
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (x-float64(i))*(s[i+1]-s[i])
}

func summarize(p placement, samples []sample) summary {
	return summary{placement: p, Control: p.control,
		LatMedian: spreadOf(values(samples, p.Name, "latMedianUs")),
		LatMean:   spreadOf(values(samples, p.Name, "latMeanUs")),
		LatP99:    spreadOf(values(samples, p.Name, "latP99Us")),
		BWMedian:  spreadOf(values(samples, p.Name, "bwMedianMBps")),
		BWAgg:     spreadOf(values(samples, p.Name, "bwAggMBps")),
	}
}

// slowRuns counts each placement's runs whose p10 latency is above 1.5 times the lowest
// p10 of any run over the same transport (shared memory or TCP).
func slowRuns(sums []summary, samples []sample) {
	transport := func(name string) string {
		for _, p := range placements {
			if p.Name == name {
				return p.btl
			}
		}
		return ""
	}
	best := map[string]float64{}
	for _, s := range samples {
		t := transport(s.Placement)
		if b, ok := best[t]; !ok || s.LatP10Us < b {
			best[t] = s.LatP10Us
		}
	}
	for i := range sums {
		for _, s := range samples {
			if s.Placement == sums[i].Name && s.LatP10Us > 1.5*best[sums[i].btl] {
				sums[i].SlowRuns++
			}
		}
	}
}

func ratioOf(num, den, metric string, samples []sample) ratio {
	n, d := values(samples, num, metric), values(samples, den, metric)
	r := ratio{Num: num, Den: den, Metric: metric, OfMedians: spreadOf(n).Median / spreadOf(d).Median}
	for i := range n { // samples are in round order: the i-th of each is the same round
		r.PerRoundSamples = append(r.PerRoundSamples, n[i]/d[i])
	}
	r.PerRound = spreadOf(r.PerRoundSamples)
	return r
}

func has(ps []placement, name string) bool {
	return slices.ContainsFunc(ps, func(p placement) bool { return p.Name == name })
}

func find(rs []ratio, num, den, metric string) *ratio {
	for i := range rs {
		if rs[i].Num == num && rs[i].Den == den && rs[i].Metric == metric {
			return &rs[i]
		}
	}
	return nil
}

// logf reports progress on stderr: a benchmark's b.Log keeps only its first lines.
func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", a...)
}

func loadavg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	x, _ := strconv.ParseFloat(f[0], 64)
	return x
}

// guestCgroup reads the CPU settings of a host's guest cgroup (the agent's
// overtime/guest-overtime-NAME), v1 or v2, whichever files exist.
func guestCgroup(name string) map[string]string {
	m := map[string]string{}
	h, err := cgroup.Detect()
	if err != nil {
		m["error"] = err.Error()
		return m
	}
	dir := h.Group("overtime/guest-overtime-" + name).Dir("cpu")
	for _, f := range []string{"cpu.idle", "cpu.max", "cpu.weight", "cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us"} {
		if b, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
			m[f] = strings.TrimSpace(string(b))
		}
	}
	m["dir"] = dir
	return m
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

var mtuRe = regexp.MustCompile(`\bmtu (\d+)`)

func mtu(b []byte, err error) int {
	if m := mtuRe.FindSubmatch(b); err == nil && m != nil {
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	return 0
}

func firstLine(b []byte, err error) string {
	if err != nil {
		return ""
	}
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return l
}

func markdown(r *report) string {
	var w strings.Builder
	pr := func(format string, a ...any) { fmt.Fprintf(&w, format, a...) }
	pr(`# MPI between guests and within a guest, against the host

Open MPI point-to-point latency and bandwidth of two ranks in the places an Overtime job
can put them, against the same two ranks run directly on the host, measured in one run:
every round runs each placement once in a shuffled order (after one warm-up round that
is not counted), so the machine's noise falls on all of them alike, and the ratios below
come from this run's own numbers.

Machine: %s, run %s, Linux %s, %s. Its 2 cores are noisy: shared with other engineers'
test runs, and with the lab itself (slurmctld, munged, two node agents, the site manager, the sync
daemon), which keep running during every placement, host ones included; the 1-minute
load average before each run is in jobs.json.

## What runs where

The lab is internal/testenv/slurmlab: a real Slurm cluster in a network namespace, two
desktops mb1 and mb2, each with a real `+"`overtime-agent run`"+` and its container guest (2
vCPUs, 256 MB, slurmd -Z, Open MPI 4.1 and PMIx from this machine: Options.MPI), pool
policy with load sensing off and nobody at the desk, so the guests are not throttled. The
program is testdata/pingpong.c, compiled on the host with mpicc; srun --bcast copies it
into the guests.

| placement | ranks | transport |
|---|---|---|
`, r.Machine, r.Date, r.Kernel, r.OpenMPI)
	for _, s := range r.Summaries {
		pr("| %s | %s | %s |\n", s.Name, s.Where, s.Transport)
	}
	var pol []string
	for _, s := range r.Samples {
		if s.Round == 1 {
			pol = append(pol, fmt.Sprintf("%s %s/nice %d", s.Placement, s.Ranks[0].Policy, s.Ranks[0].Nice))
		}
	}
	slices.Sort(pol)
	var cg []string
	for _, k := range []string{"cpu.idle", "cpu.max", "cpu.weight", "cpu.shares", "cpu.cfs_quota_us"} {
		if v, ok := r.GuestCgroup[k]; ok {
			cg = append(cg, k+" "+v)
		}
	}
	pr(`
Every run sets its BTLs alone (OMPI_MCA_btl; pml ob1), so a run that completes used them:
the guests' TCP is restricted to the lab subnet %s (each guest's veth, the bridge, the
other guest's veth; bridge MTU %d), the host's to loopback (MTU %d); shared memory is vader with CMA
(process_vm_readv) in both places. mpirun runs with --bind-to none, as srun does here
(TaskPlugin=task/none), --allow-run-as-root and --oversubscribe, in the host's own network
namespace. The guests' ranks run as Overtime runs jobs: the SPANK plugin's tasks=idle
(SCHED_IDLE, nice 19) inside a guest whose cgroup on the host has %s; the
host-*-idle controls run the host's ranks under `+"`chrt --idle 0 nice -n 19`"+`, so that
guests/host-tcp-idle is the container's share of guests/host-tcp and host-tcp-idle/host-tcp
the class's. Scheduling class and nice value as each rank reported them: %s.

Latency: 8-byte ping-pong, %d round trips timed one by one after %d of warm-up; latency
is half a round trip; a run's figure is the median of its round trips (the mean, OSU's
figure, is below: on shared cores a few preempted round trips of milliseconds dominate
it). Bandwidth: windowed streaming as osu_bw, windows of %d messages of %d bytes in
flight (Isend/Irecv, distinct buffers) then a 4-byte acknowledgement, %d windows timed
after %d; a run's figure is the median of its windows in MB/s (10^6 bytes/s). Each
message is checked: the 8-byte answer is the complement of this iteration's value, each
1 MiB message carries this window's stamps, and at the end every word of every receive
buffer is checked against its pattern; a run with a bad word fails the benchmark.

## Results (%d rounds)

Median over the rounds of each run's figure, with min–max and the interquartile range;
the OSU-style figures with their min–max. Slow runs: runs whose 10th-percentile latency
is above 1.5 times the lowest of any run over the same transport, i.e. the whole run
shifted, not a tail (see below).

| placement | latency (µs) | min–max | IQR | slow runs | bandwidth (MB/s) | min–max | IQR | OSU mean latency (µs) | OSU aggregate bandwidth (MB/s) |
|---|---|---|---|---|---|---|---|---|---|
`, labNet, r.MTU["labBridge"], r.MTU["hostLoopback"], strings.Join(cg, ", "), strings.Join(pol, "; "), r.LatIters, r.LatWarmup, r.Window, r.Bytes, r.BWWindows, r.BWWarmup, r.Rounds)
	for _, s := range r.Summaries {
		name := s.Name
		if s.Control {
			name += " (control)"
		}
		pr("| %s | %.2f | %.2f–%.2f | %.2f–%.2f | %d of %d | %.0f | %.0f–%.0f | %.0f–%.0f | %.1f (%.1f–%.1f) | %.0f (%.0f–%.0f) |\n", name,
			s.LatMedian.Median, s.LatMedian.Min, s.LatMedian.Max, s.LatMedian.Q1, s.LatMedian.Q3, s.SlowRuns, s.LatMedian.N,
			s.BWMedian.Median, s.BWMedian.Min, s.BWMedian.Max, s.BWMedian.Q1, s.BWMedian.Q3,
			s.LatMean.Median, s.LatMean.Min, s.LatMean.Max, s.BWAgg.Median, s.BWAgg.Min, s.BWAgg.Max)
	}
	pr(`
## Ratios

Ratio of the medians above; in brackets the median and min–max of the ratios of the
same round's two runs. Latency above 1 and bandwidth below 1 mean the first placement is
slower.

| ratio | latency | bandwidth | OSU mean latency | OSU aggregate bandwidth |
|---|---|---|---|---|
`)
	for _, pair := range ratioPairs {
		l := find(r.Ratios, pair[0], pair[1], "latMedianUs")
		if l == nil {
			continue
		}
		bw, lm, ba := find(r.Ratios, pair[0], pair[1], "bwMedianMBps"), find(r.Ratios, pair[0], pair[1], "latMeanUs"), find(r.Ratios, pair[0], pair[1], "bwAggMBps")
		cell := func(x *ratio) string {
			return fmt.Sprintf("%.2f (%.2f, %.2f–%.2f)", x.OfMedians, x.PerRound.Median, x.PerRound.Min, x.PerRound.Max)
		}
		pr("| %s / %s | %s | %s | %s | %s |\n", pair[0], pair[1], cell(l), cell(bw), cell(lm), cell(ba))
	}
	pr(`
The run took %.1f minutes, lab start-up included.

## Reading the numbers

The machine is a VM whose two vCPUs the hypervisor places on physical cores as it
likes: a shared-memory ping-pong (a cache line passed between the two cores) runs at one
of two speeds, roughly 2.5 times apart, for seconds to minutes at a time, whatever the
ranks' placement (the ranks' CPUs and migrations, in jobs.json, do not tell the two
apart, and binding the host's ranks to cores did not remove them in a separate check).
The slow-runs column counts the runs in the slower mode; which placement they fall on is
chance (it changes from one run of the benchmark to the next), so a shared-memory latency
ratio is to be read with its per-round median and range. TCP over loopback and over the
bridge moves with the other engineers' load: its bandwidth swings by several times
between rounds, and its mean latency is set by a few round trips preempted for
milliseconds; the medians of the round trips and of the windows are what the ratios
compare. The two TCP paths differ in more than the container: the guests' packets cross
two veths and a bridge at the MTU above, the host's stay on loopback at its own.
Every message was checked; a run with a bad word would have failed the benchmark.

## Rerun

    go test -count=1 -timeout 40m -run '^$' -bench MPI -benchtime 1x ./test/bench/mpibench -args -out "$PWD/docs/benchmarks"

As root, with scripts/deps.sh's packages (Slurm, munge, slapd, dnsmasq, crun, Open MPI).
-rounds, -budget (no new round after this time, once 5 are done), -lat-iters, -bw-windows,
-window, -bytes and -seed change the run; -controls=false leaves out the host-*-idle rows. Absolute numbers move with whatever else the shared cores
do; compare the ratios, which were measured side by side.
`, r.RunMinutes)
	return w.String()
}
