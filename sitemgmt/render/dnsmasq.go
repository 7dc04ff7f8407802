package render

import (
	"io"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/overtime-hpc/overtime/boot/storm"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// Files the TFTP root of a boot server must hold. Everything else is fetched over HTTP.
const (
	// TFTPBIOSPXELinux is the HTTP-capable PXELINUX that BIOS PXE ROMs load in full DHCP mode.
	TFTPBIOSPXELinux = "lpxelinux.0"
	// TFTPBIOSIPXE is iPXE for BIOS PXE ROMs in proxy-DHCP mode (see Dnsmasq.Config).
	TFTPBIOSIPXE = "undionly.kpxe"
	// TFTPEFIIPXE is iPXE for UEFI PXE firmware.
	TFTPEFIIPXE = "ipxe.efi"
)

// Dnsmasq renders the dnsmasq configuration of one boot server: a main configuration file
// and a dhcp-hostsfile. The main file changes only when the site's boot servers change
// (restart dnsmasq); the hosts file changes whenever a host's effective mode changes, and
// dnsmasq re-reads it on SIGHUP without a restart and without dropping leases, which is
// why the per-host tags live there and not in the main file.
type Dnsmasq struct {
	Site      *model.Site
	Server    *model.BootServer // render only the hosts this server answers (Site.HostBootServer(h) == Server.Name)
	HostsFile string            // absolute path the main config points dhcp-hostsfile= at
	TFTPRoot  string            // absolute path
}

// Config writes the main dnsmasq configuration.
//
// Boot flow: the client architecture (DHCP option 93) sets the tag bios (0) or efi64 (7,
// 9), and iPXE announces itself with the user class "iPXE" (tag ipxe).
//   - iPXE clients of any architecture get {HTTPURL}/boot/ipxe as boot file name; that
//     script chains to the per-MAC menu (IPXEChain, IPXE). MACs that are not in the
//     directory get the same chain: the HTTP endpoint serves them the site's unknown-host
//     mode, so there is one place that decides.
//   - UEFI firmware without iPXE loads ipxe.efi over TFTP, which then does the above.
//   - BIOS PXE ROMs in full DHCP mode load lpxelinux.0 over TFTP, with DHCP option 210
//     (PXELINUX path prefix, RFC 5071) set to {HTTPURL}/: lpxelinux then fetches
//     pxelinux.cfg/01-MAC, menu.c32 and the rest over HTTP from the boot server, which
//     renders the same decision as the iPXE menu (PXELinux).
//   - BIOS PXE ROMs in proxy-DHCP mode load undionly.kpxe (iPXE) over TFTP instead: a
//     dnsmasq proxy-DHCP reply carries only the PXE options (43, 60, 97) and the boot file,
//     so option 210 cannot reach lpxelinux there (dhcp-option-force is ignored in proxy
//     mode before dnsmasq 2.91's dhcp-option-pxe); iPXE needs no such option. The same
//     holds in full mode when HTTPURL is https, which lpxelinux cannot fetch.
func (d Dnsmasq) Config(out io.Writer) error {
	s := d.Server
	if err := d.check(); err != nil {
		return err
	}
	pfx, err := names.CIDR(s.Subnet)
	if err != nil {
		return errorf("boot server %s: %v", s.Name, err)
	}
	mask := net.IP(net.CIDRMask(pfx.Bits(), 32)).String()
	network := pfx.Addr().String()
	nHosts := len(d.served())
	base, _ := baseURL(s.HTTPURL)
	for _, a := range []struct{ what, v string }{{"range start", s.RangeFrom}, {"range end", s.RangeTo}, {"router", s.Router}} {
		if a.v == "" {
			continue
		}
		if err := checkIP("boot server "+s.Name+" "+a.what, a.v); err != nil {
			return err
		}
		if !pfx.Contains(netip.MustParseAddr(a.v)) {
			return errorf("boot server %s: %s %s is outside subnet %s", s.Name, a.what, a.v, s.Subnet)
		}
	}
	if (s.RangeFrom == "") != (s.RangeTo == "") {
		return errorf("boot server %s: give both range start and range end, or neither", s.Name)
	}
	// DNS servers and the domain go unquoted into dhcp-option lines, where ',' separates
	// values: the same checks as the model's, so nothing but addresses and labels is written.
	if len(s.DNSServers) > model.MaxDNSServers {
		return errorf("boot server %s: %d DNS servers, at most %d", s.Name, len(s.DNSServers), model.MaxDNSServers)
	}
	for _, a := range s.DNSServers {
		if err := checkIP("boot server "+s.Name+" DNS server", a); err != nil {
			return err
		}
		if netip.MustParseAddr(a).IsUnspecified() {
			// dnsmasq would hand out its own address, which answers no DNS (port=0).
			return errorf("boot server %s: DNS server %s is not an address a PC can ask", s.Name, a)
		}
	}
	if s.Domain != "" {
		if err := names.Domain(s.Domain); err != nil {
			return errorf("boot server %s: %v", s.Name, err)
		}
	}

	w := &writer{}
	w.comment(generated)
	w.comment("dnsmasq configuration of boot server " + s.Name + " of site " + d.Site.Name + ": " + string(s.DHCP) + " DHCP on " + s.Subnet + ".")
	w.comment("The per-host tags are in the hosts file below; it is re-read on SIGHUP.")
	w.line("")
	w.comment("No DNS: name service is the site's resolvers' job, and a second DNS server on the")
	w.comment("segment would only answer wrongly. port=0 also stops DHCP offering dnsmasq as resolver;")
	w.comment("in full DHCP the boot server's dnsServers (the site's resolvers) are handed out instead.")
	w.line("port=0")
	w.comment("Log every DHCP exchange with its tags: the answer to \"why did this PC boot X\".")
	w.line("log-dhcp")
	if s.Interface != "" {
		w.line("interface=%s", s.Interface)
	}
	w.line("")

	switch s.DHCP {
	case model.DHCPFull:
		w.comment("Full DHCP: this boot server is the DHCP server of the segment, so it may NAK")
		w.comment("leases it does not know (e.g. after the lease file was lost) instead of staying silent.")
		w.line("dhcp-authoritative")
		if s.RangeFrom != "" {
			w.line("dhcp-range=%s,%s,%s,1h", s.RangeFrom, s.RangeTo, mask)
		} else {
			w.comment("No dynamic range: only hosts of the hosts file get addresses.")
			w.line("dhcp-range=%s,static,%s", network, mask)
		}
		if s.Router != "" {
			w.line("dhcp-option=option:router,%s", s.Router)
		}
		if len(s.DNSServers) > 0 {
			w.line("dhcp-option=option:dns-server,%s", strings.Join(s.DNSServers, ","))
		}
		if s.Domain != "" {
			// Option 15 for clients that read only the domain name, 119 (RFC 3397) for
			// those that take a search list; both name the one domain.
			w.line("dhcp-option=option:domain-name,%s", s.Domain)
			w.line("dhcp-option=option:domain-search,%s", s.Domain)
		}
		w.comment("Every lease this server can hand out: its hosts plus the range (boot/storm.LeaseMax).")
		w.comment("dnsmasq's default of 1000 counts fixed addresses too: PC 1001 would get no lease.")
		w.line("dhcp-lease-max=%d", storm.LeaseMax(nHosts, rangeSize(s.RangeFrom, s.RangeTo)))
		w.comment("No ping before offering a dynamic address: dnsmasq answers nobody while it waits")
		w.comment("for the echo, which stretched 200 new PCs at once to minutes (measured, bootstorm).")
		w.comment("This server owns the segment's addresses, and the lease file survives restarts.")
		w.line("no-ping")
	case model.DHCPProxy:
		if s.Router != "" {
			return errorf("boot server %s: a proxy-DHCP server hands out no router (%s); remove it", s.Name, s.Router)
		}
		if s.RangeFrom != "" {
			return errorf("boot server %s: a proxy-DHCP server hands out no addresses; remove the range", s.Name)
		}
		if len(s.DNSServers) > 0 || s.Domain != "" {
			return errorf("boot server %s: a proxy-DHCP server hands out no DNS servers or domain; remove them", s.Name)
		}
		w.comment("Proxy DHCP: the site's DHCP server hands out addresses, router and DNS; dnsmasq")
		w.comment("adds the PXE answer.")
		w.line("dhcp-range=%s,proxy,%s", network, mask)
	default:
		return errorf("boot server %s: dhcp must be %q or %q, not %q", s.Name, model.DHCPFull, model.DHCPProxy, s.DHCP)
	}
	w.line("dhcp-hostsfile=%s", d.HostsFile)
	w.line("")

	w.comment("TFTP serves only the first-stage loaders; kernels and images come over HTTP and NFS.")
	w.line("enable-tftp")
	w.line("tftp-root=%s", d.TFTPRoot)
	w.comment("dnsmasq allows 50 concurrent transfers by default and stops reading port 69 at the")
	w.comment("limit: a room of PCs switched on together then loses loader requests (PXE-E32).")
	w.comment("Measured: 500 clients over 3 s, 13 failures at the default, none at 1000. Twice the")
	w.comment("hosts: a request read late, after the PC sent it again, starts a second transfer (boot/storm).")
	w.line("tftp-max=%d", storm.TFTPMax(nHosts))
	w.line("")

	w.comment("Client architecture, DHCP option 93: 0 BIOS, 7 and 9 x86-64 UEFI.")
	w.line("dhcp-match=set:bios,option:client-arch,0")
	w.line("dhcp-match=set:efi64,option:client-arch,7")
	w.line("dhcp-match=set:efi64,option:client-arch,9")
	w.comment("iPXE sends the user class \"iPXE\"; it gets the HTTP chain, never a loader again.")
	w.line("dhcp-userclass=set:ipxe,iPXE")
	w.line("")

	switch {
	case s.DHCP == model.DHCPFull && strings.HasPrefix(base, "https:"):
		w.comment("BIOS PXE ROM: iPXE (undionly.kpxe) over TFTP, not lpxelinux: lpxelinux speaks HTTP")
		w.comment("and FTP but not HTTPS, and the boot server's URL is https.")
		w.line("dhcp-boot=tag:bios,tag:!ipxe,%s,%s,%s", TFTPBIOSIPXE, s.Name, s.IP)
		w.comment("UEFI firmware: iPXE over TFTP.")
		w.line("dhcp-boot=tag:efi64,tag:!ipxe,%s,%s,%s", TFTPEFIIPXE, s.Name, s.IP)
	case s.DHCP == model.DHCPFull:
		w.comment("BIOS PXE ROM: lpxelinux.0 over TFTP. Option 210 is its path prefix: with an http://")
		w.comment("prefix, lpxelinux fetches pxelinux.cfg/01-MAC and menu.c32 from the boot server over")
		w.comment("HTTP. It must be forced: the PXE ROM does the DHCP and never asks for option 210.")
		w.line("dhcp-option-force=tag:bios,tag:!ipxe,210,\"%s/\"", base)
		w.line("dhcp-boot=tag:bios,tag:!ipxe,%s,%s,%s", TFTPBIOSPXELinux, s.Name, s.IP)
		w.comment("UEFI firmware: iPXE over TFTP.")
		w.line("dhcp-boot=tag:efi64,tag:!ipxe,%s,%s,%s", TFTPEFIIPXE, s.Name, s.IP)
	case s.DHCP == model.DHCPProxy:
		w.comment("PXE boot menu entries of the proxy answer, one per architecture, so the firmware boots")
		w.comment("at once. BIOS gets iPXE (undionly.kpxe), not lpxelinux: a proxy answer cannot carry")
		w.comment("option 210. The text is fixed; no site data goes into a quoted string.")
		w.line("pxe-service=tag:!ipxe,x86PC,\"Overtime network boot\",%s", TFTPBIOSIPXE)
		w.line("pxe-service=tag:!ipxe,X86-64_EFI,\"Overtime network boot\",%s", TFTPEFIIPXE)
		w.line("pxe-service=tag:!ipxe,BC_EFI,\"Overtime network boot\",%s", TFTPEFIIPXE)
	}
	w.comment("iPXE, every architecture: the chain script, which asks for the per-MAC boot script.")
	w.line("dhcp-boot=tag:ipxe,%s/boot/ipxe", base)
	return w.flush(out)
}

// Hosts writes the dhcp-hostsfile: one line per host this boot server answers, sorted by
// host name, as `MAC,IP,HOSTNAME`. The IP is left out when the host has none and always
// in proxy mode, where the site's DHCP server hands out the addresses.
//
// No set: tags (pool, mode kind), although they would make log-dhcp output nicer: dnsmasq
// 2.90 (Debian 12) aborts when SIGHUP re-reads a hosts file whose lines carry tags while
// a DHCP exchange is in flight (reproduced; a room booting while an administrator edits
// hosts would take DHCP down). Without the mode in it, the file also changes only when
// hosts change, not at every schedule slot, so dnsmasq re-reads it only then.
func (d Dnsmasq) Hosts(out io.Writer) error {
	if err := d.check(); err != nil {
		return err
	}
	hosts := d.served()
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name < hosts[j].Name })

	w := &writer{}
	w.comment(generated)
	w.comment("dnsmasq dhcp-hostsfile of boot server " + d.Server.Name + " of site " + d.Site.Name + ": " + strconv.Itoa(len(hosts)) + " hosts.")
	w.comment("MAC[,IP],HOSTNAME; re-read by dnsmasq on SIGHUP.")
	for _, h := range hosts {
		if err := checkHostname(h.Name); err != nil {
			return err
		}
		if err := checkMAC(h.MAC); err != nil {
			return errorf("host %s: %v", h.Name, err)
		}
		ip := ""
		if h.IP != "" && d.Server.DHCP == model.DHCPFull {
			if err := checkIP("host "+h.Name, h.IP); err != nil {
				return err
			}
			ip = h.IP + ","
		}
		w.line("%s,%s%s", h.MAC, ip, h.Name)
	}
	return w.flush(out)
}

// served is the hosts this boot server answers, in the site's order:
// Site.HostBootServer with the pools' boot servers looked up once, since its linear pool
// look-up per host made the 50 files of a 100,000-host site take 16 s (issue 18).
func (d Dnsmasq) served() []*model.Host {
	poolServer := make(map[string]string, len(d.Site.Pools))
	for _, p := range d.Site.Pools {
		poolServer[p.Name] = p.BootServer
	}
	hosts := make([]*model.Host, 0, len(d.Site.Hosts)/max(1, len(d.Site.BootServers)))
	for i := range d.Site.Hosts {
		h := &d.Site.Hosts[i]
		server := h.BootServer
		if server == "" {
			server = poolServer[h.Pool]
		}
		if server == d.Server.Name {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// rangeSize is the number of addresses from..to (checked before), 0 without a range.
func rangeSize(from, to string) int {
	a, err1 := netip.ParseAddr(from)
	b, err2 := netip.ParseAddr(to)
	if err1 != nil || err2 != nil || !a.Is4() || !b.Is4() {
		return 0
	}
	x, y := a.As4(), b.As4()
	lo := int64(x[0])<<24 | int64(x[1])<<16 | int64(x[2])<<8 | int64(x[3])
	hi := int64(y[0])<<24 | int64(y[1])<<16 | int64(y[2])<<8 | int64(y[3])
	if hi < lo {
		return 0
	}
	return int(hi - lo + 1)
}

func (d Dnsmasq) check() error {
	if d.Site == nil {
		return errorf("dnsmasq: no site")
	}
	if err := checkName("site", d.Site.Name); err != nil {
		return err
	}
	if err := checkServer(d.Server); err != nil {
		return err
	}
	// dhcp-boot names the TFTP server by address.
	if err := checkIP("boot server "+d.Server.Name, d.Server.IP); err != nil {
		return err
	}
	if err := checkAbsPath("dnsmasq hosts file", d.HostsFile); err != nil {
		return err
	}
	return checkAbsPath("TFTP root", d.TFTPRoot)
}
