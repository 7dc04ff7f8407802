package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash/crc32"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// The load generator and the built-in HTTP server are this binary run again inside a
// namespace; in the test binary TestMain dispatches them.
func TestMain(m *testing.M) {
	switch os.Getenv("BOOTSTORM_ROLE") {
	case "httpd":
		httpdMain()
		os.Exit(0)
	case "loadgen":
		loadgenMain()
		os.Exit(0)
	case "reaper":
		reaperMain()
		os.Exit(0)
	}
	if os.Geteuid() == 0 {
		startReaper()
	}
	code := m.Run()
	restoreSysctls() // runOnce sets the host's storm sysctls
	os.Exit(code)
}

// TestBootStorm runs small storms against the real dnsmasq (rendered configuration) and
// the built-in HTTP server and checks what every simulated PC got: an address (the
// directory's, or one from the range), the loader named in the ACK byte for byte, and
// kernel and initrd byte for byte (length and CRC-32C computed here from the files).
func TestBootStorm(t *testing.T) {
	needs.Servers(t, "root (network namespaces)", "dnsmasq")
	// Never skipped: without these the test proves nothing (make deps installs them).
	if os.Geteuid() != 0 {
		t.Fatal("needs root for network namespaces")
	}
	for _, tool := range []string{"dnsmasq", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (make deps)", tool)
		}
	}
	const loader = "/usr/lib/PXELINUX/lpxelinux.0"
	if _, err := os.Stat(loader); err != nil {
		t.Fatalf("%v (Debian package pxelinux)", err)
	}
	sweepStale()
	dir, err := os.MkdirTemp("", "bootstorm-test-")
	if err != nil {
		t.Fatal(err)
	}
	reaperTell("add", "dir", dir)
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kernel, initrd := filepath.Join(dir, "k"), filepath.Join(dir, "i")
	if err := writeRandom(kernel, 300<<10+17, 1); err != nil { // not a multiple of blksize
		t.Fatal(err)
	}
	if err := writeRandom(initrd, 1<<20, 2); err != nil {
		t.Fatal(err)
	}
	srv := filepath.Join(dir, "srv")
	if err := os.Mkdir(srv, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := prepareServerDir(srv, loader, "debian-desktop/2026.11.15-1", kernel, initrd)
	if err != nil {
		t.Fatal(err)
	}
	o := defaultOptions(srv, loader, files)
	want := wantFiles(t, loader, kernel, initrd)

	for _, c := range []runSpec{
		{Kind: "test", N: 5, Payload: "http", Addressing: "static"},
		{Kind: "test", N: 3, Payload: "http", Addressing: "dynamic"}, // dnsmasq pings each new address: ~3 s each
		{Kind: "test", N: 2, Payload: "tftp", Addressing: "static"},
	} {
		t.Run(c.Addressing+"-"+c.Payload, func(t *testing.T) {
			r, err := runOnce(context.Background(), o, c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Served != c.N || r.Failures != 0 || len(r.Clients) != c.N {
				t.Fatalf("served %d of %d, failures %d: %v", r.Served, c.N, r.Failures, r.FailureSamples)
			}
			seen := map[string]bool{}
			for i, cl := range r.Clients {
				if seen[cl.IP] {
					t.Errorf("%s: address %s given twice", cl.MAC, cl.IP)
				}
				seen[cl.IP] = true
				switch c.Addressing {
				case "static":
					if cl.IP != r.Hosts[i] {
						t.Errorf("%s: got %s, the directory says %s", cl.MAC, cl.IP, r.Hosts[i])
					}
				case "dynamic":
					if !inRange(cl.IP) {
						t.Errorf("%s: got %s, outside the range %s-%s", cl.MAC, cl.IP, rangeFrom, rangeTo)
					}
				}
				if a, err := netip.ParseAddr(cl.IP); err != nil || !netip.MustParsePrefix(subnet).Contains(a) || cl.Bits != 16 {
					t.Errorf("%s: %s/%d is not in %s", cl.MAC, cl.IP, cl.Bits, subnet)
				}
				if cl.BootFile != "lpxelinux.0" || cl.NextServer != serverIP || cl.ServerID != serverIP {
					t.Errorf("%s: boot file %q from %s (server id %s), want lpxelinux.0 from %s", cl.MAC, cl.BootFile, cl.NextServer, cl.ServerID, serverIP)
				}
				if cl.PathPrefix != "http://"+serverIP+":8080/" {
					t.Errorf("%s: option 210 %q", cl.MAC, cl.PathPrefix)
				}
				if cl.LoaderSHA256 != want.loaderSHA || cl.LoaderBlk != 1456 || cl.LoaderTSize != want.loaderSize {
					t.Errorf("%s: loader sha256 %s blksize %d tsize %d, want %s 1456 %d", cl.MAC, cl.LoaderSHA256, cl.LoaderBlk, cl.LoaderTSize, want.loaderSHA, want.loaderSize)
				}
				if len(cl.Got) != 2 {
					t.Fatalf("%s: got %d payload files", cl.MAC, len(cl.Got))
				}
				for j, g := range cl.Got {
					if g != want.payload[j] {
						t.Errorf("%s: payload file %d: got %+v, want %+v", cl.MAC, j, g, want.payload[j])
					}
				}
				if cl.DHCPms <= 0 || cl.LoaderMs <= 0 || cl.PayloadMs <= 0 || cl.TotalMs < cl.DHCPms+cl.LoaderMs+cl.PayloadMs-1 {
					t.Errorf("%s: phase times %v %v %v total %v", cl.MAC, cl.DHCPms, cl.LoaderMs, cl.PayloadMs, cl.TotalMs)
				}
			}
			// dnsmasq logs each ACK before it sends it: one per client at least.
			if r.DnsmasqLog["DHCPACK"] < c.N {
				t.Errorf("dnsmasq logged %d DHCPACKs for %d clients", r.DnsmasqLog["DHCPACK"], c.N)
			}
			if !strings.Contains(r.Config, "interface="+bridgeName+"\n") || !strings.Contains(r.Config, "dhcp-boot=tag:bios,tag:!ipxe,lpxelinux.0,bs00,"+serverIP) {
				t.Errorf("not the rendered configuration:\n%s", r.Config)
			}
			if r.CPU["dnsmasq"] < 0 || r.CPU["http"] < 0 {
				t.Errorf("cpu %v", r.CPU)
			}
		})
	}
	// The checks must catch wrong bytes: a loader that is not the file, a payload whose
	// CRC is not the one served.
	t.Run("detects-wrong-bytes", func(t *testing.T) {
		bad := o
		bad.LoaderFile = "/usr/lib/PXELINUX/pxelinux.0"
		if _, err := os.Stat(bad.LoaderFile); err != nil {
			bad.LoaderFile = kernel
		}
		r, err := runOnce(context.Background(), bad, runSpec{Kind: "test", N: 1, Payload: "http", Addressing: "static"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Failures != 1 || r.FailuresByPhase["loader"] != 1 {
			t.Errorf("wrong loader not detected: %+v %v", r.FailuresByPhase, r.FailureSamples)
		}
		bad = o
		bad.Files = append([]fileSum(nil), o.Files...)
		bad.Files[1].CRC32C ^= 1
		r, err = runOnce(context.Background(), bad, runSpec{Kind: "test", N: 1, Payload: "http", Addressing: "static"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Failures != 1 || r.FailuresByPhase["payload"] != 1 {
			t.Errorf("wrong payload not detected: %+v %v", r.FailuresByPhase, r.FailureSamples)
		}
	})

	// Nothing left behind.
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "bst"+strconv.Itoa(os.Getpid())) {
			t.Errorf("namespace %s left behind", e.Name())
		}
	}
}

type wanted struct {
	loaderSHA  string
	loaderSize int64
	payload    []fileGot
}

// wantFiles computes the expected bytes from the source files, independently of the
// copies the servers serve.
func wantFiles(t *testing.T, loader string, payload ...string) wanted {
	t.Helper()
	b, err := os.ReadFile(loader)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	w := wanted{loaderSHA: hex.EncodeToString(sum[:]), loaderSize: int64(len(b))}
	for _, p := range payload {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		w.payload = append(w.payload, fileGot{Size: int64(len(b)), CRC32C: crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))})
	}
	return w
}
