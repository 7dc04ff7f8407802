package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// fakeTFTP is a lossy TFTP server on loopback: it serves data with blksize 1456 and
// drops the packets drop says to drop (by the n-th packet it receives), so that the
// client must recover by retransmitting. It never retransmits itself: every recovery
// in these tests is the client's.
func fakeTFTP(t *testing.T, data []byte, drop func(n int) bool) netip.AddrPort {
	t.Helper()
	l, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		buf := make([]byte, 2048)
		n, from, err := l.ReadFromUDPAddrPort(buf)
		for err == nil && drop(1) { // the first RRQ is lost: wait for its retransmission
			n, from, err = l.ReadFromUDPAddrPort(buf)
		}
		if err != nil || binary.BigEndian.Uint16(buf) != tftpRRQ {
			return
		}
		_ = n
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) // the transfer's TID
		if err != nil {
			return
		}
		defer c.Close()
		t.Cleanup(func() { c.Close() })
		const blk = 1456
		_, _ = c.WriteToUDPAddrPort(append([]byte{0, tftpOACK}, "blksize\x001456\x00"...), from)
		seen := 1
		for {
			k, _, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			seen++
			if k < 4 || binary.BigEndian.Uint16(buf) != tftpACK || drop(seen) {
				continue
			}
			b := int(binary.BigEndian.Uint16(buf[2:])) + 1
			off := (b - 1) * blk
			if off > len(data) {
				return // the last ACK
			}
			end := min(off+blk, len(data))
			p := []byte{0, tftpDATA, byte(b >> 8), byte(b)}
			_, _ = c.WriteToUDPAddrPort(append(p, data[off:end]...), from)
		}
	}()
	return l.LocalAddr().(*net.UDPAddr).AddrPort()
}

func fastOpts() tftpOptions {
	return tftpOptions{BlkSize: 1456, Timeout: 50 * time.Millisecond, MaxTimeout: 100 * time.Millisecond, MaxRetries: 20}
}

func TestTFTPRetransmits(t *testing.T) {
	data := make([]byte, 10*1456) // a multiple of blksize: ends with an empty block
	for i := range data {
		data[i] = byte(i * 7)
	}
	dropped := map[int]bool{}
	srv := fakeTFTP(t, data, func(n int) bool {
		// Lose the first RRQ and the ACKs numbered 3 and 7 the first time round.
		if (n == 1 || n == 3 || n == 7) && !dropped[n] {
			dropped[n] = true
			return true
		}
		return false
	})
	var got bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := tftpGetPort(ctx, srv, "f", fastOpts(), &got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("got %d bytes, want %d", got.Len(), len(data))
	}
	// At least the three losses; more if this machine was slow enough for a spurious
	// timeout, which the protocol absorbs.
	if st.Retries < 3 || st.BlkSize != 1456 || st.Blocks != 11 {
		t.Errorf("stats %+v: want >= 3 retries, blksize 1456, 11 blocks", st)
	}
}

func TestTFTPDeadline(t *testing.T) {
	srv := fakeTFTP(t, nil, func(int) bool { return true }) // a black hole
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	o := fastOpts()
	o.MaxRetries = 1000
	st, err := tftpGetPort(ctx, srv, "f", o, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("err %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second || st.Retries < 1 {
		t.Errorf("gave up after %s with %d retries", d, st.Retries)
	}
}

// tftpGetPort is tftpGet against a server on another port than 69 (the fake above).
func tftpGetPort(ctx context.Context, srv netip.AddrPort, file string, o tftpOptions, w *bytes.Buffer) (tftpStats, error) {
	return tftpGetFrom(ctx, netip.MustParseAddr("127.0.0.1"), srv, file, o, w)
}
