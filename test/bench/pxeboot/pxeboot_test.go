// Package pxeboot measures real PXE boots of QEMU VMs against the real boot server (the
// same lab as test/pxe_test.go): time from power-on to each stage of the boot chain,
// median and spread over several boots, BIOS (SeaBIOS + iPXE ROM) and UEFI (OVMF + iPXE).
// Run by `make bench`:
//
//	go test -run '^$' -bench PXEBoot -benchtime 1x ./test/bench/pxeboot -args -out docs/benchmarks
//
// It writes pxeboot.json and pxeboot.md into -out. Under TCG (this machine's /dev/kvm does
// not run guests) the numbers are an upper bound for real hardware: CPU-bound stages (the
// firmware, kernel decompression and boot) run ~10-50x slower than native.
package pxeboot

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/images/testimage"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
)

var (
	out   = flag.String("out", "", "directory for pxeboot.json and pxeboot.md (empty: only log)")
	boots = flag.Int("boots", 5, "boots per firmware")
)

// stages in console order; each is the time from QEMU's start to the first line matching.
var stages = []struct{ name, re string }{
	{"menu decided (iPXE script ran)", `Overtime: vm1 mode desktop`},
	{"kernel started", `Linux version`},
	{"root mounted (overlay over NFS squashfs)", `overtime: root: overlay`},
	{"init up", `overtime-test: up mode=desktop host=vm1`},
}

type run struct {
	Firmware string             `json:"firmware"`
	Accel    string             `json:"accel"`
	Seconds  map[string]float64 `json:"seconds"` // stage -> seconds since power-on
}

func BenchmarkPXEBoot(b *testing.B) {
	img := testimage.Dir(b)
	f, err := os.Open(filepath.Join(img, "root.squashfs"))
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.New()
	size, _ := f.WriteTo(h)
	f.Close()
	l := bootlab.Start(b, bootlab.Options{Now: "2026-12-02T10:30:00+01:00"})
	l.CopyImage(img, "testimg/v1")
	l.Apply(fmt.Sprintf(`name: lab
timezone: Europe/Berlin
defaultMode: desktop
bootServers:
  - {name: bs1, ip: %s, httpURL: "%s", nfsRoot: %s, dhcp: full, interface: %s, subnet: 10.20.0.0/24, rangeFrom: 10.20.0.200, rangeTo: 10.20.0.250}
images:
  - {name: testimg, kind: desktop, versions: [{version: v1, sha256: %s, size: %d, path: testimg/v1, created: "2026-11-20T09:00:00Z"}]}
modes:
  - {name: desktop, kind: desktop, image: testimg, kernelArgs: "console=ttyS0"}
pools:
  - {name: lab, bootServer: bs1}
roles:
  - {name: site-admins, role: site-admin, members: [admin]}
hosts:
  - {name: vm1, mac: "52:54:00:0a:00:01", ip: 10.20.0.11, pool: lab}
`, bootlab.ServerIP, bootlab.HTTPURL, l.Images, bootlab.Bridge, hex.EncodeToString(h.Sum(nil)), size))
	l.StartBootServer()
	if err := l.NS.AddTap("tap1", bootlab.Bridge); err != nil {
		b.Fatal(err)
	}

	var runs []run
	for i := 0; i < b.N; i++ {
		for _, fw := range []vmtest.Firmware{vmtest.BIOS, vmtest.UEFI} {
			for n := 0; n < *boots; n++ {
				dir := b.TempDir()
				start := time.Now()
				vm := vmtest.StartT(b, vmtest.Config{Name: "vm1", Dir: dir, NS: l.NS, Tap: "tap1", MAC: "52:54:00:0a:00:01", Firmware: fw})
				r := run{Firmware: fw.String(), Accel: vm.Accel, Seconds: map[string]float64{}}
				for _, s := range stages {
					if _, err := vm.Console.Expect(regexp.MustCompile(s.re), 5*time.Minute); err != nil {
						b.Fatalf("%s boot %d: %v", fw, n, err)
					}
					r.Seconds[s.name] = time.Since(start).Seconds()
				}
				vm.Stop()
				b.Logf("%s boot %d: %v", fw, n, r.Seconds)
				runs = append(runs, r)
			}
		}
	}
	if *out != "" {
		if err := write(*out, runs); err != nil {
			b.Fatal(err)
		}
	}
}

func median(xs []float64) (med, lo, hi float64) {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

func write(dir string, runs []run) error {
	type summary struct {
		Firmware, Stage string
		Median, Min     float64
		Max             float64
		N               int
	}
	var sums []summary
	for _, fw := range []string{"bios", "uefi"} {
		for _, s := range stages {
			var xs []float64
			for _, r := range runs {
				if r.Firmware == fw {
					xs = append(xs, r.Seconds[s.name])
				}
			}
			if len(xs) == 0 {
				continue
			}
			m, lo, hi := median(xs)
			sums = append(sums, summary{fw, s.name, m, lo, hi, len(xs)})
		}
	}
	accel := ""
	if len(runs) > 0 {
		accel = runs[0].Accel
	}
	host, _ := os.Hostname()
	j, err := json.MarshalIndent(map[string]any{
		"date": time.Now().UTC().Format(time.RFC3339), "host": host, "cpus": runtime.NumCPU(), "accel": accel,
		"runs": runs, "summary": sums,
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "pxeboot.json"), append(j, '\n'), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# Real PXE boots in QEMU: power-on to root mounted\n\n")
	fmt.Fprintf(&md, "`make bench` (test/bench/pxeboot), %s, %d CPUs, QEMU accelerator **%s**. One VM at a time,\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), accel)
	fmt.Fprintf(&md, "booted from power-on through the whole chain against the real boot server in a network\n")
	fmt.Fprintf(&md, "namespace: DHCP (dnsmasq) → iPXE → per-host script and kernel + initrd over HTTP (`overtime serve`)\n")
	fmt.Fprintf(&md, "→ initramfs: DHCP, NFSv3 mount (nfs-ganesha), squashfs + tmpfs overlay → init of the test image\n")
	fmt.Fprintf(&md, "(Debian cloud kernel, this project's initrd, busybox root); the menu waits 1 s. Seconds since QEMU\n")
	fmt.Fprintf(&md, "started; median (min–max) of n boots.\n\n")
	if accel == "tcg" {
		fmt.Fprintf(&md, "TCG emulates the CPU (this machine's /dev/kvm does not run guests), so firmware and kernel stages are\n")
		fmt.Fprintf(&md, "many times slower than on a real PC; the network stages are not. Treat these as upper bounds.\n\n")
	}
	fmt.Fprintf(&md, "| firmware | stage | median s | min–max s | n |\n|---|---|---:|---:|---:|\n")
	for _, s := range sums {
		fmt.Fprintf(&md, "| %s | %s | %.1f | %.1f–%.1f | %d |\n", s.Firmware, s.Stage, s.Median, s.Min, s.Max, s.N)
	}
	return os.WriteFile(filepath.Join(dir, "pxeboot.md"), []byte(md.String()), 0o644)
}
