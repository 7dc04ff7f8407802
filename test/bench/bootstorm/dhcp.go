package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"golang.org/x/sys/unix"
)

// The DHCP side of a PXE ROM (PXE 2.1 spec, BIOS): DISCOVER and REQUEST from 0.0.0.0:68
// with the broadcast flag (the ROM has no address yet, so the server must broadcast its
// answers), the PXE options, and retransmission after 4, 8, 16 and 32 s.
//
// All simulated clients share one socket bound to port 68 on the load generator's
// interface; a reader goroutine hands each answer to the client whose transaction ID it
// carries (and whose chaddr matches).

// pxeVendorClass is what a BIOS PXE ROM (UNDI 2.1) sends as option 60.
const pxeVendorClass = "PXEClient:Arch:00000:UNDI:002001"

// pxeParams is the parameter request list (option 55) of an Intel BIOS PXE ROM.
var pxeParams = []dhcpv4.OptionCode{
	dhcpv4.OptionSubnetMask, dhcpv4.OptionTimeOffset, dhcpv4.OptionRouter, dhcpv4.OptionNameServer,
	dhcpv4.OptionDomainNameServer, dhcpv4.OptionHostName, dhcpv4.OptionBootFileSize, dhcpv4.OptionDomainName,
	dhcpv4.OptionMeritDumpFile, dhcpv4.OptionSwapServer, dhcpv4.OptionRootPath, dhcpv4.OptionExtensionsPath,
	dhcpv4.OptionVendorSpecificInformation, dhcpv4.OptionServerIdentifier, dhcpv4.OptionClassIdentifier,
	dhcpv4.OptionTFTPServerName, dhcpv4.OptionBootfileName,
	dhcpv4.GenericOptionCode(128), dhcpv4.GenericOptionCode(129), dhcpv4.GenericOptionCode(130), dhcpv4.GenericOptionCode(131),
	dhcpv4.GenericOptionCode(132), dhcpv4.GenericOptionCode(133), dhcpv4.GenericOptionCode(134), dhcpv4.GenericOptionCode(135),
}

type dhcpMux struct {
	conn    net.PacketConn
	clients map[dhcpv4.TransactionID]*dhcpClient // fixed before the reader starts
	list    []*dhcpClient                        // in the order of the MACs given
	stray   atomic.Int64                         // answers for no client of ours, or unparsable
	dropped atomic.Int64                         // answers a client's queue had no room for
}

type dhcpClient struct {
	mac  net.HardwareAddr
	xid  dhcpv4.TransactionID
	guid [16]byte
	in   chan *dhcpv4.DHCPv4
}

// listenDHCP opens 0.0.0.0:68 bound to ifname, with SO_BROADCAST and a receive buffer
// large enough for a room's worth of broadcast answers.
func listenDHCP(ifname string) (net.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, ifname); serr != nil {
				return
			}
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 1); serr != nil {
				return
			}
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	return lc.ListenPacket(context.Background(), "udp4", "0.0.0.0:68")
}

func newDHCPMux(conn net.PacketConn, macs []net.HardwareAddr, xidBase uint32) *dhcpMux {
	m := &dhcpMux{conn: conn, clients: map[dhcpv4.TransactionID]*dhcpClient{}}
	for i, mac := range macs {
		c := &dhcpClient{mac: mac, in: make(chan *dhcpv4.DHCPv4, 16)}
		x := xidBase + uint32(i)
		c.xid = dhcpv4.TransactionID{byte(x >> 24), byte(x >> 16), byte(x >> 8), byte(x)}
		// The ROM's SMBIOS UUID (option 97): any stable 16 bytes per machine.
		h := sha256.Sum256(mac)
		copy(c.guid[:], h[:16])
		m.clients[c.xid] = c
		m.list = append(m.list, c)
	}
	return m
}

// run reads answers until the socket is closed.
func (m *dhcpMux) run() {
	buf := make([]byte, 4096)
	for {
		n, _, err := m.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p, err := dhcpv4.FromBytes(buf[:n])
		if err != nil || p.OpCode != dhcpv4.OpcodeBootReply {
			m.stray.Add(1)
			continue
		}
		c := m.clients[p.TransactionID]
		if c == nil || !bytesEqual(p.ClientHWAddr, c.mac) {
			m.stray.Add(1)
			continue
		}
		select {
		case c.in <- p:
		default:
			m.dropped.Add(1)
		}
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

type lease struct {
	IP         netip.Addr
	Bits       int
	ServerID   netip.Addr
	NextServer netip.Addr // siaddr: the TFTP server
	BootFile   string
	PathPrefix string // option 210
}

var bcast = &net.UDPAddr{IP: net.IPv4bcast, Port: 67}

func (m *dhcpMux) packet(c *dhcpClient, typ dhcpv4.MessageType, secs uint16, extra ...dhcpv4.Modifier) ([]byte, error) {
	mods := []dhcpv4.Modifier{
		dhcpv4.WithTransactionID(c.xid),
		dhcpv4.WithHwAddr(c.mac),
		dhcpv4.WithBroadcast(true),
		dhcpv4.WithMessageType(typ),
		dhcpv4.WithRequestedOptions(pxeParams...),
		dhcpv4.WithGeneric(dhcpv4.OptionMaximumDHCPMessageSize, []byte{0x04, 0xec}), // 1260
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.INTEL_X86PC)),
		dhcpv4.WithGeneric(dhcpv4.OptionClientNetworkInterfaceIdentifier, []byte{1, 2, 1}), // UNDI 2.1
		dhcpv4.WithGeneric(dhcpv4.OptionClientMachineIdentifier, append([]byte{0}, c.guid[:]...)),
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(pxeVendorClass)),
		func(d *dhcpv4.DHCPv4) { d.NumSeconds = secs },
	}
	d, err := dhcpv4.New(append(mods, extra...)...)
	if err != nil {
		return nil, err
	}
	return d.ToBytes(), nil
}

// exchange sends pkt and waits for an answer of type want, retransmitting after each of
// timeouts; other answers with our xid (a late OFFER while we wait for the ACK) are
// skipped. A NAK ends the wait with errNAK.
func (m *dhcpMux) exchange(ctx context.Context, c *dhcpClient, build func(secs uint16) ([]byte, error), want dhcpv4.MessageType, timeouts []time.Duration, start time.Time, retries *int) (*dhcpv4.DHCPv4, error) {
	for i, to := range timeouts {
		if i > 0 {
			*retries++
		}
		pkt, err := build(uint16(time.Since(start) / time.Second))
		if err != nil {
			return nil, err
		}
		if _, err := m.conn.WriteTo(pkt, bcast); err != nil {
			return nil, err
		}
		t := time.NewTimer(to)
	wait:
		for {
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
				break wait
			case p := <-c.in:
				switch p.MessageType() {
				case want:
					t.Stop()
					return p, nil
				case dhcpv4.MessageTypeNak:
					if want == dhcpv4.MessageTypeAck {
						t.Stop()
						return nil, errNAK
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("no %s after %d tries", want, len(timeouts))
}

var errNAK = errors.New("DHCPNAK")

// lease runs DISCOVER/OFFER/REQUEST/ACK. Retransmissions are counted in retries.
func (m *dhcpMux) lease(ctx context.Context, c *dhcpClient, timeouts []time.Duration, retries *int) (lease, error) {
	start := time.Now()
	for round := 0; ; round++ {
		if round > 0 {
			*retries++ // a NAK: start over, as a ROM does
		}
		offer, err := m.exchange(ctx, c, func(secs uint16) ([]byte, error) {
			return m.packet(c, dhcpv4.MessageTypeDiscover, secs)
		}, dhcpv4.MessageTypeOffer, timeouts, start, retries)
		if err != nil {
			return lease{}, fmt.Errorf("discover: %w", err)
		}
		sid := offer.ServerIdentifier()
		if sid == nil || offer.YourIPAddr.To4() == nil || offer.YourIPAddr.IsUnspecified() {
			return lease{}, fmt.Errorf("offer without server identifier or address: %s", offer.Summary())
		}
		ack, err := m.exchange(ctx, c, func(secs uint16) ([]byte, error) {
			return m.packet(c, dhcpv4.MessageTypeRequest, secs,
				dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(offer.YourIPAddr)),
				dhcpv4.WithOption(dhcpv4.OptServerIdentifier(sid)))
		}, dhcpv4.MessageTypeAck, timeouts, start, retries)
		if errors.Is(err, errNAK) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return lease{}, fmt.Errorf("request: %w", err)
		}
		l := lease{BootFile: ack.BootFileName, PathPrefix: string(ack.GetOneOption(dhcpv4.GenericOptionCode(210)))}
		var ok bool
		if l.IP, ok = netip.AddrFromSlice(ack.YourIPAddr.To4()); !ok {
			return lease{}, fmt.Errorf("ack without address")
		}
		l.ServerID, _ = netip.AddrFromSlice(sid.To4())
		if l.NextServer, ok = netip.AddrFromSlice(ack.ServerIPAddr.To4()); !ok || l.NextServer.IsUnspecified() {
			l.NextServer = l.ServerID
		}
		if l.BootFile == "" {
			l.BootFile = ack.BootFileNameOption()
		}
		if mask := ack.SubnetMask(); mask != nil {
			l.Bits, _ = mask.Size()
		} else {
			l.Bits = 24
		}
		return l, nil
	}
}
