package wirecap

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// pcapFile writes a pcap of link type lt holding frames.
func pcapFile(lt uint32, frames ...[]byte) []byte {
	var b bytes.Buffer
	h := make([]byte, 24)
	binary.LittleEndian.PutUint32(h[0:], 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 262144)
	binary.LittleEndian.PutUint32(h[20:], lt)
	b.Write(h)
	for _, f := range frames {
		rh := make([]byte, 16)
		binary.LittleEndian.PutUint32(rh[8:], uint32(len(f)))
		binary.LittleEndian.PutUint32(rh[12:], uint32(len(f)))
		b.Write(rh)
		b.Write(f)
	}
	return b.Bytes()
}

// tcpFrame is an Ethernet frame (or, cooked, a Linux SLL one) with an IPv4 TCP segment.
func tcpFrame(cooked bool, seq uint32, syn bool, data string) []byte {
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 8080)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	if syn {
		tcp[13] = 0x02
	}
	tcp = append(tcp, data...)
	ip := make([]byte, 20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(tcp)))
	ip[9] = 6
	copy(ip[12:], []byte{10, 31, 0, 2})
	copy(ip[16:], []byte{10, 31, 0, 1})
	ip = append(ip, tcp...)
	if cooked {
		l := make([]byte, 16)
		binary.BigEndian.PutUint16(l[14:], 0x0800)
		return append(l, ip...)
	}
	l := make([]byte, 14)
	binary.BigEndian.PutUint16(l[12:], 0x0800)
	return append(l, ip...)
}

var flow = Flow{"tcp", netip.MustParseAddrPort("10.31.0.2:40000"), netip.MustParseAddrPort("10.31.0.1:8080")}

// A secret split over two segments that arrive out of order, one of them twice (as -i any
// sees a packet on the veth and on the bridge), is found; so is its base64.
func TestReassembledSecretIsFound(t *testing.T) {
	token := "tok-0123456789abcdef"
	body := "POST /api/v1/agent/heartbeat HTTP/1.1\r\nAuthorization: Bearer " + token + "\r\n\r\n"
	cut := len(body) - 10
	for _, cooked := range []bool{false, true} {
		lt := uint32(1)
		if cooked {
			lt = 113
		}
		p := pcapFile(lt,
			tcpFrame(cooked, 999, true, ""),
			tcpFrame(cooked, 1000+uint32(cut), false, body[cut:]),
			tcpFrame(cooked, 1000, false, body[:cut]),
			tcpFrame(cooked, 1000, false, body[:cut]),
		)
		streams, err := ReadStreams(bytes.NewReader(p))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(streams[flow]); got != body {
			t.Fatalf("cooked=%v: stream %q, want %q", cooked, got, body)
		}
		if hits := Find(streams, []byte(token)); len(hits) != 1 || hits[0] != flow {
			t.Fatalf("cooked=%v: token found in %v", cooked, hits)
		}
	}
	key := bytes.Repeat([]byte{0xfe, 0x01, 0x7a}, 400)
	json := `{"mungeKey":"` + base64.StdEncoding.EncodeToString(key) + `"}`
	streams, err := ReadStreams(bytes.NewReader(pcapFile(1, tcpFrame(false, 5, false, json))))
	if err != nil {
		t.Fatal(err)
	}
	if hits := Find(streams, key); len(hits) != 1 {
		t.Fatalf("the munge key in JSON was not found: %v", hits)
	}
	if hits := Find(streams, []byte("not-in-there-at-all")); len(hits) != 0 {
		t.Fatalf("found what is not there: %v", hits)
	}
}

func TestNotAPcap(t *testing.T) {
	if _, err := ReadStreams(bytes.NewReader(make([]byte, 24))); err == nil {
		t.Fatal("a file of zeros read as a pcap")
	}
}

// The real tcpdump's file, on loopback: what a process sends in clear is in the stream.
func TestCaptureOfLoopback(t *testing.T) {
	needs.Servers(t, "root (tcpdump)", "tcpdump")
	file := filepath.Join(t.TempDir(), "lo.pcap")
	c := Start(t, exec.Command, "lo", file)
	secret := "clear-text-secret-4711"
	sendOverLoopback(t, secret)
	// tcpdump writes each packet as it reads it (-U): the file holds the secret soon.
	var flows int
	found := poll.Wait(20*time.Second, func() bool {
		streams, err := Streams(file)
		if err != nil {
			return false
		}
		flows = len(streams)
		return len(Find(streams, []byte(secret))) > 0
	})
	c.Stop()
	if !found {
		fi, _ := os.Stat(file)
		t.Fatalf("the secret sent over loopback is not in the capture (%d flows, file %v)", flows, fi)
	}
}

// sendOverLoopback sends s over a TCP connection on 127.0.0.1.
func sendOverLoopback(t *testing.T, s string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if b := <-got; string(b) != s {
		t.Fatalf("loopback peer read %q", b)
	}
}
