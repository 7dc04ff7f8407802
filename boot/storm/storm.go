// Package storm holds every limit a boot server sets so that a room of PCs switched on in
// the same instant is served at once (issue 18): the kernel settings `overtime bootserver
// run` applies before it starts dnsmasq, and the dnsmasq options the renderer
// (sitemgmt/render) emits. Each decision is here once, with the measurement behind it
// (test/bench/bootstorm, docs/benchmarks/bootstorm.md); the benchmark's -tuning=defaults
// reverts exactly these to the kernel's and dnsmasq's defaults, side by side.
package storm

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Sysctl is one kernel setting the boot server raises at start.
type Sysctl struct {
	Key     string // as sysctl(8) names it, e.g. net.core.rmem_default
	Value   int64  // the boot server raises it to at least this; a higher value is left alone
	Default int64  // the kernel's default (Linux 6.x), what the benchmark's -tuning=defaults sets
	Why     string
}

// Sysctls are the kernel settings for a boot storm. They are host-wide: on Linux 6.18
// net.core.rmem_* are read-only copies of the host's value in a network namespace, and
// net.ipv4.neigh.default.* (one ARP table for all namespaces) exists only in the host's,
// so the boot server sets them for the whole machine and must run in the host namespace
// to do so (as the packaged unit does, as root).
var Sysctls = []Sysctl{
	{
		Key: "net.core.rmem_default", Value: 8 << 20, Default: 212992,
		Why: "dnsmasq 2.90 has no option for SO_RCVBUF: its DHCP (67) and TFTP (69) sockets get this default. " +
			"At 212992 bytes about 130 DHCP packets fit; 1,000 PCs switched on at once sent 1,000 DISCOVERs in the same " +
			"millisecond, the kernel dropped the rest (2609 drops at dnsmasq's socket), and the clients' PXE " +
			"retransmissions after 4, 8, 16, 32 s, synchronised as the power-on was, overflowed it again: 372 of 1,000 " +
			"clients never got an address (bootstorm, N=1000). 8 MiB holds several thousand DHCP packets (a few KiB " +
			"of kernel memory each, NIC-dependent); it is a limit, not an allocation. rmem_max (what SO_RCVBUF may ask for) is left alone: it does not bound the default",
	},
	{
		Key: "net.ipv4.neigh.default.gc_thresh1", Value: 4096, Default: 128,
		Why: "the boot server talks TFTP, HTTP and NFS to every PC of its segment and needs an ARP entry for each; " +
			"below gc_thresh1 the kernel keeps them all",
	},
	{
		Key: "net.ipv4.neigh.default.gc_thresh2", Value: 8192, Default: 512,
		Why: "above gc_thresh2 entries older than 5 s are collected: with 1,000 PCs fetching kernels, ARP again and again",
	},
	{
		Key: "net.ipv4.neigh.default.gc_thresh3", Value: 16384, Default: 1024,
		Why: "at gc_thresh3 (1,024: one room of 1,000 PCs plus the rest of the host, all namespaces count) the kernel " +
			"refuses new neighbours (\"neighbour table overflow\") and drops their packets",
	},
}

// procSys is where the sysctls are (tests point it elsewhere).
var procSys = "/proc/sys/"

// path is the /proc/sys file of a key.
func path(key string) string { return procSys + strings.ReplaceAll(key, ".", "/") }

// Read returns a sysctl's current value.
func Read(key string) (int64, error) {
	b, err := os.ReadFile(path(key))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// Write sets a sysctl.
func Write(key string, v int64) error {
	return os.WriteFile(path(key), []byte(strconv.FormatInt(v, 10)+"\n"), 0o644)
}

// Change is what Raise did with one sysctl.
type Change struct {
	Key      string
	Old, New int64 // New == Old: already at least Value
	Err      error // could not read or set it
}

// Raise sets every sysctl of list below its Value to its Value and returns what it found
// and did; the error joins those it could not set (not root, not the host namespace, a
// read-only /proc/sys in a container).
func Raise(list []Sysctl) ([]Change, error) {
	var out []Change
	var errs []error
	for _, s := range list {
		c := Change{Key: s.Key}
		c.Old, c.Err = Read(s.Key)
		if c.Err == nil {
			c.New = c.Old
			if c.Old < s.Value {
				if c.Err = Write(s.Key, s.Value); c.Err == nil {
					c.New = s.Value
				}
			}
		}
		if c.Err != nil {
			c.Err = fmt.Errorf("%s=%d: %w", s.Key, s.Value, c.Err)
			errs = append(errs, c.Err)
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// TFTPMax is dnsmasq's tftp-max for a boot server of hosts PCs: concurrent TFTP transfers
// (dnsmasq's default is 50). dnsmasq stops reading port 69 at the limit, so a room of PCs
// switched on together loses loader requests (PXE-E32). Measured: 500 clients over 3 s,
// 13 failures at the default, none at 1000. Twice the hosts: a read request that
// dnsmasq reads after its client has already sent it again starts a second transfer
// (1,000 clients switched on at once on a busy machine: 1,674 loader transfers). The PCs
// load only the small first-stage loader over TFTP (75 KB); a transfer costs dnsmasq one
// file descriptor (see NoFile).
func TFTPMax(hosts int) int {
	return max(1000, 2*hosts)
}

// NoFile is the open-file limit the boot server gives dnsmasq (its soft and hard
// RLIMIT_NOFILE are raised to at least this before dnsmasq starts). dnsmasq lowers
// tftp-max to what its limit allows: at systemd's default soft limit of 1024 it logged
// "restricting maximum simultaneous TFTP transfers to 974" (bootstorm, ulimit -Sn 1024).
const NoFile = 65536

// DnsmasqNice is the scheduling priority (nice value) the boot server gives dnsmasq. One
// single-threaded process answers DHCP and every TFTP transfer, against timeouts of the
// PXE ROMs of 1 to 4 s, while `overtime serve` sends kernels and initrds with every core
// it gets: in a storm of 1,000 PCs on a busy machine, dnsmasq's DHCP answers took 16 s
// (p50) with no packet dropped. dnsmasq's own CPU is small (3 s for 1,000 PCs).
const DnsmasqNice = -10

// LogPipe is the size of the pipe dnsmasq logs into (the boot server reads it; 64 KiB by
// default). With log-dhcp dnsmasq writes about 50 lines (4 KB) per PC: a default pipe is
// full after 16 PCs, and while its reader is not scheduled dnsmasq blocks in write() and
// answers nobody. 1 MiB is the kernel's default fs.pipe-max-size: about 250 PCs.
const LogPipe = 1 << 20

// DefaultLeaseMax is dnsmasq's dhcp-lease-max default.
const DefaultLeaseMax = 1000

// LeaseMax is dnsmasq's dhcp-lease-max for a boot server with hosts directory hosts and a
// dynamic range of rangeSize addresses: every lease it can ever hand out. dnsmasq's
// default of 1,000 counts fixed-address hosts too, so a boot server of more than 1,000
// PCs (or 1,000 plus visitors in the range) would answer "no leases left" to the rest.
// The limit guards against a flood of invented MACs, which the range bounds anyway; a
// lease costs dnsmasq about 100 bytes.
func LeaseMax(hosts, rangeSize int) int {
	return max(DefaultLeaseMax, hosts+rangeSize)
}
