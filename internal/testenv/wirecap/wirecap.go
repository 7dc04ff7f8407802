// Package wirecap records what crosses a lab's network with tcpdump and looks for secrets
// in it: the tests' proof that host tokens, passwords and the munge key never cross the
// pool's network in clear (docs/node-agent.md "The channel").
//
// The capture is on every interface of the lab's namespace ("any"): processes that share
// the namespace talk over its loopback even to an address on the bridge, and the guests
// over their veths and the bridge, so no one interface sees it all. The reader is a small
// pcap parser with TCP reassembly (by sequence number, duplicates dropped): a secret that
// a sender split over two segments is found as well as one in a single packet.
package wirecap

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/syncbuf"
)

// Capture is a running tcpdump.
type Capture struct {
	File string
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
}

// Start runs tcpdump on iface ("any": all) through cmd, a function that makes the command
// in the lab's namespace (netns.NS.Command), writing file, and waits until it listens.
func Start(t testing.TB, cmd func(string, ...string) *exec.Cmd, iface, file string) *Capture {
	t.Helper()
	// -U: each packet is written when captured (a capture stopped by a signal loses
	// nothing); -s0: whole packets; -Z root: keep root's rights to write file; -n: no
	// name look-ups on the wire being recorded.
	c := &Capture{File: file, cmd: cmd("tcpdump", "-i", iface, "-n", "-s0", "-U", "-Z", "root", "-w", file),
		out: &syncbuf.Buffer{}, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("tcpdump: %v", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() { c.Stop() })
	listening := poll.WaitEvery(20*time.Second, 50*time.Millisecond, func() bool {
		return strings.Contains(c.out.String(), "listening on") || c.exited()
	})
	if !listening || c.exited() {
		t.Fatalf("tcpdump did not start listening on %s:\n%s", iface, c.out.String())
	}
	return c
}

func (c *Capture) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Stop ends the capture (tcpdump writes what it holds on SIGINT) and returns what it
// printed: its packet counts.
func (c *Capture) Stop() string {
	if !c.exited() {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	return c.out.String()
}

// Flow is one direction of a TCP connection or a UDP exchange.
type Flow struct {
	Proto    string // "tcp" or "udp"
	Src, Dst netip.AddrPort
}

func (f Flow) String() string { return fmt.Sprintf("%s %s > %s", f.Proto, f.Src, f.Dst) }

// Streams reads a pcap file and returns each TCP direction's bytes in sequence order
// (gaps left as zeros) and each UDP direction's payloads one after another.
func Streams(file string) (map[Flow][]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadStreams(f)
}

// maxStream bounds one reassembled direction (a lab's connections carry far less).
const maxStream = 256 << 20

// ReadStreams is Streams of a pcap stream.
func ReadStreams(r io.Reader) (map[Flow][]byte, error) {
	var gh [24]byte
	if _, err := io.ReadFull(r, gh[:]); err != nil {
		return nil, fmt.Errorf("pcap header: %w", err)
	}
	var bo binary.ByteOrder
	switch binary.LittleEndian.Uint32(gh[:4]) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		bo = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("not a pcap file (magic %x)", gh[:4])
	}
	linkType := bo.Uint32(gh[20:24]) & 0x0fffffff
	type segment struct {
		seq  uint32
		data []byte
	}
	tcp := map[Flow][]segment{}
	isn := map[Flow]uint32{} // the first byte's sequence number, from the SYN
	udp := map[Flow][]byte{}
	for {
		var rh [16]byte
		if _, err := io.ReadFull(r, rh[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break // a capture killed mid-record ends there
			}
			return nil, err
		}
		n := bo.Uint32(rh[8:12])
		if n > 1<<20 {
			return nil, fmt.Errorf("pcap record of %d bytes", n)
		}
		pkt := make([]byte, n)
		if _, err := io.ReadFull(r, pkt); err != nil {
			break
		}
		ip, ok := network(linkType, pkt)
		if !ok {
			continue
		}
		proto, src, dst, payload, ok := transport(ip)
		if !ok {
			continue
		}
		switch proto {
		case 17:
			if len(payload) < 8 {
				continue
			}
			fl := Flow{"udp", netip.AddrPortFrom(src, binary.BigEndian.Uint16(payload[0:2])), netip.AddrPortFrom(dst, binary.BigEndian.Uint16(payload[2:4]))}
			udp[fl] = append(udp[fl], payload[8:]...)
		case 6:
			if len(payload) < 20 {
				continue
			}
			off := int(payload[12]>>4) * 4
			if off < 20 || off > len(payload) {
				continue
			}
			fl := Flow{"tcp", netip.AddrPortFrom(src, binary.BigEndian.Uint16(payload[0:2])), netip.AddrPortFrom(dst, binary.BigEndian.Uint16(payload[2:4]))}
			seq := binary.BigEndian.Uint32(payload[4:8])
			if payload[13]&0x02 != 0 { // SYN
				isn[fl] = seq + 1
			}
			if data := payload[off:]; len(data) > 0 {
				tcp[fl] = append(tcp[fl], segment{seq, append([]byte(nil), data...)})
			}
		}
	}
	out := map[Flow][]byte{}
	for fl, segs := range tcp {
		base, ok := isn[fl]
		if !ok { // the connection began before the capture: start at its first segment
			base = segs[0].seq
		}
		sort.SliceStable(segs, func(i, j int) bool { return segs[i].seq-base < segs[j].seq-base })
		var s []byte
		for _, sg := range segs {
			at := int(sg.seq - base)
			end := at + len(sg.data)
			if at < 0 || end > maxStream {
				continue
			}
			if end > len(s) {
				s = append(s, make([]byte, end-len(s))...)
			}
			copy(s[at:end], sg.data)
		}
		out[fl] = s
	}
	for fl, b := range udp {
		out[fl] = b
	}
	return out, nil
}

// network finds the IPv4 or IPv6 packet in a frame of the capture's link type.
func network(linkType uint32, pkt []byte) ([]byte, bool) {
	var etype uint16
	switch linkType {
	case 1: // Ethernet
		if len(pkt) < 14 {
			return nil, false
		}
		etype, pkt = binary.BigEndian.Uint16(pkt[12:14]), pkt[14:]
		if etype == 0x8100 && len(pkt) >= 4 { // one VLAN tag
			etype, pkt = binary.BigEndian.Uint16(pkt[2:4]), pkt[4:]
		}
	case 113: // Linux cooked (tcpdump -i any)
		if len(pkt) < 16 {
			return nil, false
		}
		etype, pkt = binary.BigEndian.Uint16(pkt[14:16]), pkt[16:]
	case 276: // Linux cooked v2
		if len(pkt) < 20 {
			return nil, false
		}
		etype, pkt = binary.BigEndian.Uint16(pkt[0:2]), pkt[20:]
	case 12, 101: // raw IP
		if len(pkt) == 0 {
			return nil, false
		}
		if pkt[0]>>4 == 6 {
			etype = 0x86dd
		} else {
			etype = 0x0800
		}
	default:
		return nil, false
	}
	return pkt, etype == 0x0800 || etype == 0x86dd
}

// transport splits an IP packet (IPv6 without extension headers) into its protocol,
// addresses and the transport header with payload.
func transport(ip []byte) (proto uint8, src, dst netip.Addr, payload []byte, ok bool) {
	if len(ip) < 1 {
		return
	}
	switch ip[0] >> 4 {
	case 4:
		if len(ip) < 20 {
			return
		}
		ihl := int(ip[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(ip[2:4]))
		if ihl < 20 || total < ihl || total > len(ip) {
			return
		}
		if binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 { // a fragment: not in the lab
			return
		}
		src, _ = netip.AddrFromSlice(ip[12:16])
		dst, _ = netip.AddrFromSlice(ip[16:20])
		return ip[9], src, dst, ip[ihl:total], true
	case 6:
		if len(ip) < 40 {
			return
		}
		plen := int(binary.BigEndian.Uint16(ip[4:6]))
		if 40+plen > len(ip) {
			return
		}
		src, _ = netip.AddrFromSlice(ip[8:24])
		dst, _ = netip.AddrFromSlice(ip[24:40])
		return ip[6], src, dst, ip[40 : 40+plen], true
	}
	return
}

// Forms are the encodings in which a secret could cross in a protocol's text: as is,
// base64 (standard and URL alphabets: JSON's []byte, HTTP Basic auth), hex. A long
// secret (a 1024-byte munge key) is looked for by its first 48 bytes, encoded from its
// start, as an encoder of the whole secret writes it.
func Forms(secret []byte) [][]byte {
	s := secret
	if len(s) > 48 {
		s = s[:48]
	}
	forms := [][]byte{s,
		[]byte(base64.StdEncoding.EncodeToString(s)[:len(s)*4/3/4*4]),
		[]byte(base64.URLEncoding.EncodeToString(s)[:len(s)*4/3/4*4]),
		[]byte(hex.EncodeToString(s)),
		[]byte(strings.ToUpper(hex.EncodeToString(s))),
	}
	var out [][]byte
	for _, f := range forms {
		if len(f) >= 8 { // shorter would match by chance
			out = append(out, f)
		}
	}
	return out
}

// Find reports every flow that carries one of secret's forms.
func Find(streams map[Flow][]byte, secret []byte) []Flow {
	var hits []Flow
	for fl, b := range streams {
		for _, f := range Forms(secret) {
			if bytes.Contains(b, f) {
				hits = append(hits, fl)
				break
			}
		}
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].String() < hits[j].String() })
	return hits
}

// Carrying reports the flows whose bytes hold s as is (the test's proof that the capture
// saw what it should: a text known to cross in clear).
func Carrying(streams map[Flow][]byte, s string) []Flow {
	var hits []Flow
	for fl, b := range streams {
		if bytes.Contains(b, []byte(s)) {
			hits = append(hits, fl)
		}
	}
	return hits
}

// TLSTo reports whether a TCP connection to port carried a TLS handshake from the client
// (a ClientHello record, 0x16 0x03).
func TLSTo(streams map[Flow][]byte, port uint16) bool {
	for fl, b := range streams {
		if fl.Proto == "tcp" && fl.Dst.Port() == port && len(b) > 5 && b[0] == 0x16 && b[1] == 0x03 {
			return true
		}
	}
	return false
}
