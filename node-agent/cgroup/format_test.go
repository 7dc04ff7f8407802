package cgroup

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCPUMaxFormat(t *testing.T) {
	for _, c := range []struct {
		cpus float64
		want string
	}{
		{0, "max 100000"},
		{-1, "max 100000"},
		{0.2, "20000 100000"},
		{0.25, "25000 100000"},
		{1, "100000 100000"},
		{1.5, "150000 100000"},
		{16, "1600000 100000"},
		{0.001, "1000 100000"},  // the kernel's minimum quota is 1 ms
		{0.0001, "1000 100000"}, // rounded up to it
		{1.0 / 3, "33333 100000"},
	} {
		if got := FormatCPUMax(c.cpus); got != c.want {
			t.Errorf("FormatCPUMax(%v) = %q, want %q", c.cpus, got, c.want)
		}
	}
}

func TestCPUMaxParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		err  bool
	}{
		{"max 100000", 0, false},
		{"max", 0, false},
		{"20000 100000\n", 0.2, false},
		{"50000 50000", 1, false},
		{"150000", 1.5, false},
		{"", 0, true},
		{"x 100000", 0, true},
		{"1000 0", 0, true},
		{"1000 100000 3", 0, true},
		{"-5 100000", 0, true},
	} {
		got, err := ParseCPUMax(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseCPUMax(%q) = %v, %v; want %v, err %v", c.in, got, err, c.want, c.err)
		}
	}
	// Round trip.
	for _, cpus := range []float64{0, 0.2, 0.5, 1, 2.75} {
		got, err := ParseCPUMax(FormatCPUMax(cpus))
		if err != nil || got != cpus {
			t.Errorf("round trip %v: %v %v", cpus, got, err)
		}
	}
}

func TestCPUsFromV1(t *testing.T) {
	for _, c := range []struct {
		q, p string
		want float64
		err  bool
	}{
		{"-1", "100000", 0, false},
		{"20000\n", "100000\n", 0.2, false},
		{"200000", "100000", 2, false},
		{"abc", "100000", 0, true},
		{"1000", "0", 0, true},
	} {
		got, err := cpusFromV1(c.q, c.p)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("cpusFromV1(%q, %q) = %v, %v", c.q, c.p, got, err)
		}
	}
}

func TestParseCPUStat(t *testing.T) {
	v2 := `usage_usec 8286000
user_usec 6142000
system_usec 2144000
core_sched.force_idle_usec 0
nr_periods 120
nr_throttled 97
throttled_usec 7853000
nr_bursts 0
burst_usec 0
`
	u, th, err := ParseCPUStat(v2)
	if err != nil || u != 8286*time.Millisecond || th != (Throttling{120, 97, 7853 * time.Millisecond}) {
		t.Fatalf("v2: %v %+v %v", u, th, err)
	}
	v1 := "nr_periods 15\nnr_throttled 12\nthrottled_time 1234567890\nnr_bursts 0\nburst_time 0\n"
	u, th, err = ParseCPUStat(v1)
	if err != nil || u != -1 || th != (Throttling{15, 12, 1234567890}) {
		t.Fatalf("v1: %v %+v %v", u, th, err)
	}
	// A controller-less cgroup2 group has only the usage lines.
	u, th, err = ParseCPUStat("usage_usec 5\nuser_usec 3\nsystem_usec 2\nnice_usec 0\n")
	if err != nil || u != 5*time.Microsecond || th != (Throttling{}) {
		t.Fatalf("core: %v %+v %v", u, th, err)
	}
	for _, bad := range []string{"usage_usec", "usage_usec x", "a 1 2"} {
		if _, _, err := ParseCPUStat(bad); err == nil {
			t.Errorf("ParseCPUStat(%q): no error", bad)
		}
	}
}

func TestParseKeyValuesEvents(t *testing.T) {
	kv, err := ParseKeyValues("populated 1\nfrozen 1\n")
	if err != nil || kv["populated"] != 1 || kv["frozen"] != 1 {
		t.Fatalf("%v %v", kv, err)
	}
}

func TestParsePressure(t *testing.T) {
	full := `some avg10=1.50 avg60=0.25 avg300=0.05 total=123456
full avg10=0.10 avg60=0.00 avg300=0.00 total=789
`
	ps, err := ParsePressure(full)
	if err != nil {
		t.Fatal(err)
	}
	want := PressureStat{
		Some: PressureLine{1.5, 0.25, 0.05, 123456 * time.Microsecond},
		Full: PressureLine{0.1, 0, 0, 789 * time.Microsecond},
	}
	if ps != want {
		t.Fatalf("got %+v want %+v", ps, want)
	}
	// System-wide cpu on kernels before 5.13 has only "some".
	ps, err = ParsePressure("some avg10=12.00 avg60=3.00 avg300=1.00 total=5")
	if err != nil || ps.Some.Avg10 != 12 || ps.Full != (PressureLine{}) {
		t.Fatalf("some only: %+v %v", ps, err)
	}
	for _, bad := range []string{
		"",
		"full avg10=0.00 avg60=0.00 avg300=0.00 total=0",
		"some avg10=x avg60=0.00 avg300=0.00 total=0",
		"some avg10=0.00 total=-1",
		"many avg10=0.00",
		"some avg10",
	} {
		if _, err := ParsePressure(bad); err == nil {
			t.Errorf("ParsePressure(%q): no error", bad)
		}
	}
	p := Pressure{CPU: PressureStat{Some: PressureLine{Avg10: 3}}, IO: PressureStat{Some: PressureLine{Avg10: 7}}}
	if p.MaxSome() != 7 {
		t.Fatalf("MaxSome %v", p.MaxSome())
	}
}

const hybridMountinfo = `22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

// Debian 12 with systemd: one cgroup2 mount.
const unifiedMountinfo = `24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
27 24 0:25 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`

// Older distributions co-mount cpu and cpuacct; a container sees its own subtree.
const legacyMountinfo = `100 99 0:40 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct
101 99 0:41 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory
102 99 0:42 /docker/abc /sys/fs/cgroup/freezer ro,nosuid - cgroup cgroup rw,freezer
103 99 0:43 / /mnt/with\040space rw - cgroup cgroup rw,pids,clone_children
`

func TestParseMountinfo(t *testing.T) {
	h, err := ParseMountinfo(strings.NewReader(hybridMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if h.Version() != V1 || h.UnifiedMount() != "/sys/fs/cgroup/unified" {
		t.Fatalf("hybrid: %s", h)
	}
	g := h.Group("overtime/guest-a")
	for ctrl, want := range map[string]string{
		"cpu":     "/sys/fs/cgroup/cpu/overtime/guest-a",
		"cpuacct": "/sys/fs/cgroup/cpuacct/overtime/guest-a",
		"memory":  "/sys/fs/cgroup/memory/overtime/guest-a",
		"freezer": "/sys/fs/cgroup/freezer/overtime/guest-a",
		"":        "/sys/fs/cgroup/unified/overtime/guest-a",
		"cpuset":  "", // not spanned
	} {
		if got := g.Dir(ctrl); got != want {
			t.Errorf("hybrid Dir(%q) = %q, want %q", ctrl, got, want)
		}
	}
	if g.Path() != "/overtime/guest-a" || len(g.dirs()) != 7 {
		t.Errorf("hybrid path %s dirs %v", g.Path(), g.dirs())
	}

	h, err = ParseMountinfo(strings.NewReader(unifiedMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	g = h.Group("/overtime.slice/overtime-guest-a.scope/guest")
	if h.Version() != V2 || g.Dir("cpu") != "/sys/fs/cgroup/overtime.slice/overtime-guest-a.scope/guest" || len(g.dirs()) != 1 {
		t.Fatalf("unified: %s %s", h, g.Dir("cpu"))
	}
	if c := g.Child("x").Path(); c != "/overtime.slice/overtime-guest-a.scope/guest/x" {
		t.Fatalf("child %s", c)
	}

	h, err = ParseMountinfo(strings.NewReader(legacyMountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if h.Version() != V1 || h.UnifiedMount() != "" {
		t.Fatalf("legacy: %s", h)
	}
	g = &Group{h: h, paths: map[string]string{"cpu": "/docker/abc/sub", "cpuacct": "/docker/abc/sub", "pids": "/p"}}
	if d := g.Dir("cpu"); d != "/sys/fs/cgroup/cpu,cpuacct/sub" {
		t.Errorf("container root: %s", d)
	}
	if d := g.Dir("pids"); d != "/mnt/with space/p" {
		t.Errorf("escaped mount point: %s", d)
	}
	if len(g.dirs()) != 2 {
		t.Errorf("co-mounted controllers share a directory: %v", g.dirs())
	}
	if _, err := g.Pressure(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("pressure without cgroup2: %v", err)
	}

	if _, err := ParseMountinfo(strings.NewReader("22 1 253:0 / / rw - ext4 /dev/vda rw\n")); err == nil {
		t.Fatal("no cgroup mounts: no error")
	}
}

func TestGroupPathsStayInside(t *testing.T) {
	h, _ := ParseMountinfo(strings.NewReader(unifiedMountinfo))
	for in, want := range map[string]string{
		"a/b":        "/a/b",
		"/a/../../b": "/b",
		"../..":      "/",
		"":           "/",
	} {
		if got := h.Group(in).Path(); got != want {
			t.Errorf("Group(%q) = %s, want %s", in, got, want)
		}
	}
	if got := h.Group("a").Child("../../x").Path(); got != "/a/x" {
		t.Errorf("Child escaping: %s", got)
	}
}

func TestParseProcCgroup(t *testing.T) {
	in := `12:pids:/user.slice
9:name=systemd:/
4:memory:/process_api/7b29
2:cpu,cpuacct:/machine/qemu-1-a.libvirt-qemu
0::/machine.slice/machine-qemu.scope/libvirt
`
	m, err := ParseProcCgroup(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"pids": "/user.slice", "name=systemd": "/", "memory": "/process_api/7b29",
		"cpu": "/machine/qemu-1-a.libvirt-qemu", "cpuacct": "/machine/qemu-1-a.libvirt-qemu",
		"": "/machine.slice/machine-qemu.scope/libvirt",
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%q: %q, want %q", k, m[k], v)
		}
	}
	if _, err := ParseProcCgroup(strings.NewReader("garbage\n")); err == nil {
		t.Error("malformed: no error")
	}
}

func TestQuotaFor(t *testing.T) {
	if QuotaFor(0.5) != 50*time.Millisecond || QuotaFor(0) != 0 || QuotaFor(1e-9) != time.Millisecond {
		t.Fatal(QuotaFor(0.5), QuotaFor(0), QuotaFor(1e-9))
	}
}

func TestParent(t *testing.T) {
	h, _ := ParseMountinfo(strings.NewReader(hybridMountinfo))
	g := &Group{h: h, paths: map[string]string{"cpu": "/machine/qemu-1-a.libvirt-qemu/emulator", "memory": "/m/x", "": "/"}}
	p := g.Parent()
	if p.Path() != "/machine/qemu-1-a.libvirt-qemu" || p.Paths()["memory"] != "/m" || p.Paths()[""] != "/" {
		t.Fatalf("parent %v", p.Paths())
	}
}
