// Package publishbench measures publishing one image version to three boot servers:
// the site manager (real slapd, `overtime serve`'s API over HTTP on loopback, with its
// --images-dir store) checks the store's copy at publish (artefact.Verify of the whole
// version), then three boot servers' image syncs (boot/bootserver, in this process, each
// with its own export tree) fetch the version directory, fsync it, verify every file
// against SHA256SUMS and the catalogue's sha256, rename it into place and report it.
//
// Wall time runs from the publish request until the last boot server's report is
// accepted; bytes moved are what the boot servers downloaded (HTTP bodies). The root
// image is 2 GiB of pseudo-random bytes (ChaCha8: incompressible, written fresh for each
// run, so the page cache holds it as a build would have left it); kernel and initrd are
// 8 MiB and 64 MiB of the same. Each run starts from empty boot servers.
//
//	go test -count=1 -timeout 60m -run '^$' -bench Publish -benchtime 1x ./test/bench/publishbench -args -out DIR
package publishbench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/boot/bootserver"
	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/model"
)

var (
	out    = flag.String("out", "", "directory for publish.json and publish.md (empty: only log)")
	runs   = flag.Int("runs", 3, "runs")
	rootMB = flag.Int("root-mib", 2048, "size of root.squashfs in MiB")
)

type stats struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func summarise(v []float64) stats {
	s := slices.Clone(v)
	slices.Sort(s)
	return stats{Median: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
}

type result struct {
	Date         string    `json:"date"`
	CPUs         int       `json:"cpus"`
	Servers      int       `json:"bootServers"`
	VersionBytes int64     `json:"versionBytes"`
	WallS        []float64 `json:"wallSeconds"`
	PublishS     []float64 `json:"publishSeconds"`
	DistributeS  []float64 `json:"distributeSeconds"`
	BytesMoved   []int64   `json:"bytesMoved"`
	Wall         stats     `json:"wallStats"`
	Publish      stats     `json:"publishStats"`
	Distribute   stats     `json:"distributeStats"`
	Note         string    `json:"note"`
}

func writeRandom(path string, size int64, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	buf := make([]byte, 4<<20)
	for left := size; left > 0; {
		n := min(int64(len(buf)), left)
		_, _ = r.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			f.Close()
			return err
		}
		left -= n
	}
	return f.Close()
}

func site() *model.Site {
	s := &model.Site{Name: "example", Timezone: "Europe/Berlin", DefaultMode: "desktop",
		Images: []model.Image{{Name: "desk", Kind: model.ImageDesktop}},
		Modes:  []model.Mode{{Name: "desktop", Kind: model.KindDesktop, Image: "desk"}},
		Roles:  []model.RoleGrant{{Name: "site-admins", Role: model.RoleSiteAdmin, Members: []string{"admin"}}},
	}
	for _, n := range []string{"1", "2", "3"} {
		ip := "10.2" + n + ".0.1"
		s.BootServers = append(s.BootServers, model.BootServer{Name: "bs" + n, IP: ip, HTTPURL: "http://" + ip + ":8080", DHCP: model.DHCPProxy, Subnet: "10.2" + n + ".0.0/24"})
		s.Pools = append(s.Pools, model.Pool{Name: "room" + n, BootServer: "bs" + n})
		s.Roles = append(s.Roles, model.RoleGrant{Name: "bootsrv" + n, Role: model.RoleBootServer, BootServer: "bs" + n, Members: []string{"bs" + n}})
	}
	return s
}

// oneRun publishes version run of a fresh image to three fresh boot servers.
func oneRun(b *testing.B, run int) (wall, publish, distribute float64, moved, versionBytes int64) {
	base, err := os.MkdirTemp("", "publishbench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	store := filepath.Join(base, "store")
	env := testenv.New(b, testenv.Options{API: api.Options{ImagesDir: store}})
	admin := env.Admin()
	if err := admin.Send(http.MethodPut, "/api/v1/site", nil, site(), nil); err != nil {
		b.Fatal(err)
	}
	var cfgs []*bootserver.Config
	for _, n := range []string{"bs1", "bs2", "bs3"} {
		if err := admin.Send(http.MethodPost, "/api/v1/users", nil, api.UserRequest{UID: n, Password: n + "-secret"}, nil); err != nil {
			b.Fatal(err)
		}
		c := &bootserver.Config{Client: env.Client(n, n+"-secret"), Name: n, StateDir: filepath.Join(base, n, "state"),
			ExportRoot: filepath.Join(base, n, "export"), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		for _, d := range []string{c.StateDir, c.ExportRoot} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		cfgs = append(cfgs, c)
	}
	// The build: the artefacts and SHA256SUMS in the store.
	dir := filepath.Join(store, "desk", "1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for i, f := range []struct {
		name string
		size int64
	}{{model.ImageKernel, 8 << 20}, {model.ImageInitrd, 64 << 20}, {model.ImageRoot, int64(*rootMB) << 20}} {
		if err := writeRandom(filepath.Join(dir, f.name), f.size, uint64(run*10+i)); err != nil {
			b.Fatal(err)
		}
		versionBytes += f.size
	}
	files, err := artefact.Write(dir, model.ImageKernel, model.ImageInitrd, model.ImageRoot)
	if err != nil {
		b.Fatal(err)
	}
	v := model.ImageVersion{Version: "1", Path: "desk/1", Size: int64(*rootMB) << 20}
	for _, f := range files {
		if f.Name == model.ImageRoot {
			v.SHA256 = f.SHA256
		}
	}

	start := time.Now()
	if err := admin.Send(http.MethodPost, "/api/v1/images/desk/versions", nil, v, nil); err != nil {
		b.Fatal(err)
	}
	published := time.Now()
	var wg sync.WaitGroup
	stats := make([]*bootserver.ImageStats, len(cfgs))
	errs := make([]error, len(cfgs))
	for i, c := range cfgs {
		stats[i] = &bootserver.ImageStats{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			held, err := c.SyncImagesOnce(context.Background(), stats[i])
			if err == nil && len(held) != 1 {
				err = fmt.Errorf("%s holds %v", c.Name, held)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	end := time.Now()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range stats {
		moved += s.BytesFetched.Load()
	}
	return end.Sub(start).Seconds(), published.Sub(start).Seconds(), end.Sub(published).Seconds(), moved, versionBytes
}

func BenchmarkPublish(b *testing.B) {
	res := result{Date: time.Now().UTC().Format("2006-01-02"), CPUs: runtime.NumCPU(), Servers: 3,
		Note: "site manager and three boot servers on one machine (loopback HTTP, one disk); boot server syncs in-process"}
	for i := 0; i < b.N; i++ {
		for r := 0; r < *runs; r++ {
			w, p, d, m, vb := oneRun(b, r)
			b.Logf("run %d: wall %.1f s (publish check %.1f s, distribution %.1f s), %d bytes moved", r, w, p, d, m)
			res.WallS, res.PublishS, res.DistributeS, res.BytesMoved = append(res.WallS, w), append(res.PublishS, p), append(res.DistributeS, d), append(res.BytesMoved, m)
			res.VersionBytes = vb
		}
	}
	res.Wall, res.Publish, res.Distribute = summarise(res.WallS), summarise(res.PublishS), summarise(res.DistributeS)
	if *out == "" {
		return
	}
	data, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "publish.json"), append(data, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
	md := fmt.Sprintf(`# Publishing a 2 GiB image to three boot servers

`+"`go test -count=1 -timeout 60m -run '^$' -bench Publish -benchtime 1x ./test/bench/publishbench -args -out docs/benchmarks`"+` (part of `+"`make bench`"+`), %s, %d CPUs.

One version: root.squashfs %d MiB, initrd 64 MiB, kernel 8 MiB of pseudo-random bytes
(incompressible), %d bytes in all, with its SHA256SUMS. Wall time runs from the publish
request (the site manager verifies the store's copy before it records the version) until
the third boot server's report is accepted (each fetched the directory over HTTP, fsynced
it, verified every file against SHA256SUMS and the catalogue's sha256, renamed it into
place). %d runs, each from empty boot servers; median (min-max).

| | median | min | max |
|---|---|---|---|
| wall time, publish to verified on all three | %.1f s | %.1f s | %.1f s |
| publish (store copy verified) | %.1f s | %.1f s | %.1f s |
| distribution (three boot servers in parallel) | %.1f s | %.1f s | %.1f s |
| bytes moved (site manager to boot servers) | %d | | |

Bytes moved are exactly three copies of the version plus three SHA256SUMS files (2.22 GB
each): every byte crosses the network once per boot server and nothing twice. (That a
boot server holding a verified version fetches nothing at the next round is by design and
checked by TestDistribution, not measured here.) The publish check reads files a build
has just written, from the page cache; a cold store reads 2 GiB from disk first.

%s. Here the three boot servers share one disk and %d CPUs with the site manager, so the
numbers are dominated by writing and hashing 3 x 2 GiB on one machine; on separate boot
servers the distribution runs in parallel, bounded by the store's uplink (one copy is
about 18 s at 1 Gbit/s, so three copies through one shared 1 Gbit/s uplink take at least
about 54 s; 10 Gbit/s removes that bound) and by each boot server's disk and hashing.
`, res.Date, res.CPUs, *rootMB, res.VersionBytes, len(res.WallS),
		res.Wall.Median, res.Wall.Min, res.Wall.Max,
		res.Publish.Median, res.Publish.Min, res.Publish.Max,
		res.Distribute.Median, res.Distribute.Min, res.Distribute.Max,
		res.BytesMoved[0], res.Note, res.CPUs)
	if err := os.WriteFile(filepath.Join(*out, "publish.md"), []byte(md), 0o644); err != nil {
		b.Fatal(err)
	}
}
