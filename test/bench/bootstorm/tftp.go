package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"
)

// A TFTP client as a PXE ROM's (RFC 1350 with the option extension of RFC 2347, blksize
// of RFC 2348 and tsize of RFC 2349): lock-step, one block in flight, the client
// retransmits its last packet (RRQ or ACK) when nothing arrives within the timeout,
// backing off exponentially, and gives up after MaxRetries consecutive timeouts or at
// the deadline. Duplicate DATA (the server retransmitted because our ACK was lost) is
// acknowledged again but never counted as progress.

const (
	tftpRRQ   = 1
	tftpDATA  = 3
	tftpACK   = 4
	tftpERROR = 5
	tftpOACK  = 6
)

type tftpOptions struct {
	BlkSize    int           // requested blksize option; 0: none (512-byte blocks)
	Timeout    time.Duration // first retransmission timeout; doubles per consecutive timeout
	MaxTimeout time.Duration
	MaxRetries int // consecutive timeouts before giving up
}

type tftpStats struct {
	Bytes      int64
	Blocks     int
	Retries    int // retransmissions after a timeout
	Duplicates int // duplicate DATA acknowledged again
	BlkSize    int // block size in use (after OACK)
	TSize      int64
}

// tftpGet fetches file from server:69, binding the local end to local (port chosen by
// the kernel), and writes the data to w.
func tftpGet(ctx context.Context, local, server netip.Addr, file string, o tftpOptions, w io.Writer) (tftpStats, error) {
	return tftpGetFrom(ctx, local, netip.AddrPortFrom(server, 69), file, o, w)
}

func tftpGetFrom(ctx context.Context, local netip.Addr, dst netip.AddrPort, file string, o tftpOptions, w io.Writer) (tftpStats, error) {
	var st tftpStats
	server := dst.Addr()
	conn, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)))
	if err != nil {
		return st, err
	}
	defer conn.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Hour)
	}

	rrq := tftpRequest(file, o.BlkSize)
	last := rrq
	var tid netip.AddrPort // the server's transfer port, fixed by its first answer
	blk := 512
	if _, err := conn.WriteToUDPAddrPort(rrq, dst); err != nil {
		return st, err
	}
	buf := make([]byte, 65536)
	ack := make([]byte, 4)
	var expect uint16 = 1
	timeout, timeouts := o.Timeout, 0
	for {
		if ctx.Err() != nil {
			return st, fmt.Errorf("tftp %s: %w after %d bytes", file, ctx.Err(), st.Bytes)
		}
		wait := time.Now().Add(timeout)
		if wait.After(deadline) {
			wait = deadline
		}
		_ = conn.SetReadDeadline(wait)
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				return st, err
			}
			if !time.Now().Before(deadline) {
				return st, fmt.Errorf("tftp %s: deadline after %d bytes, %d retries", file, st.Bytes, st.Retries)
			}
			timeouts++
			if timeouts > o.MaxRetries {
				return st, fmt.Errorf("tftp %s: %d timeouts in a row after %d bytes", file, timeouts, st.Bytes)
			}
			st.Retries++
			timeout = min(2*timeout, o.MaxTimeout)
			to := dst
			if tid.IsValid() {
				to = tid
			}
			if _, err := conn.WriteToUDPAddrPort(last, to); err != nil {
				return st, err
			}
			continue
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		if from.Addr() != server {
			continue
		}
		if tid.IsValid() && from != tid {
			// RFC 1350: a packet from another port is not ours; tell its sender.
			_, _ = conn.WriteToUDPAddrPort(tftpErrorPacket(5, "Unknown transfer ID"), from)
			continue
		}
		if n < 4 {
			continue
		}
		p := buf[:n]
		op := binary.BigEndian.Uint16(p)
		switch op {
		case tftpERROR:
			msg, _, _ := bytes.Cut(p[4:], []byte{0})
			return st, fmt.Errorf("tftp %s: server error %d: %s", file, binary.BigEndian.Uint16(p[2:]), msg)
		case tftpOACK:
			if expect != 1 {
				continue // a duplicate OACK after data started: ignore
			}
			tid = from
			opts := parseOptions(p[2:])
			blk = 512
			if v, ok := opts["blksize"]; ok {
				blk, _ = strconv.Atoi(v)
				if blk < 8 || blk > 65464 || (o.BlkSize > 0 && blk > o.BlkSize) {
					return st, fmt.Errorf("tftp %s: bad blksize %q in OACK", file, v)
				}
			}
			if v, ok := opts["tsize"]; ok {
				st.TSize, _ = strconv.ParseInt(v, 10, 64)
			}
			binary.BigEndian.PutUint16(ack, tftpACK)
			binary.BigEndian.PutUint16(ack[2:], 0)
			last = ack
			timeout, timeouts = o.Timeout, 0
			if _, err := conn.WriteToUDPAddrPort(ack, tid); err != nil {
				return st, err
			}
		case tftpDATA:
			if !tid.IsValid() {
				tid = from // the server ignored our options: plain RFC 1350, 512-byte blocks
				blk = 512
			}
			b := binary.BigEndian.Uint16(p[2:])
			data := p[4:]
			switch b {
			case expect:
				if len(data) > blk {
					return st, fmt.Errorf("tftp %s: block %d has %d bytes, blksize %d", file, b, len(data), blk)
				}
				if _, err := w.Write(data); err != nil {
					return st, err
				}
				st.Bytes += int64(len(data))
				st.Blocks++
				binary.BigEndian.PutUint16(ack, tftpACK)
				binary.BigEndian.PutUint16(ack[2:], b)
				last = ack
				timeout, timeouts = o.Timeout, 0
				if _, err := conn.WriteToUDPAddrPort(ack, tid); err != nil {
					return st, err
				}
				if len(data) < blk {
					st.BlkSize = blk
					return st, nil
				}
				expect++ // wraps to 0 after 65535, as servers that roll over do
			case expect - 1:
				st.Duplicates++
				if _, err := conn.WriteToUDPAddrPort(last, tid); err != nil {
					return st, err
				}
			}
		}
	}
}

func tftpRequest(file string, blksize int) []byte {
	b := []byte{0, tftpRRQ}
	b = append(b, file...)
	b = append(b, 0)
	b = append(b, "octet"...)
	b = append(b, 0)
	if blksize > 0 {
		// What PXE ROMs ask for: the file size (to check it fits) and a block size that
		// fits an Ethernet frame.
		b = append(b, "tsize\x000\x00"...)
		b = append(b, "blksize\x00"...)
		b = append(b, strconv.Itoa(blksize)...)
		b = append(b, 0)
	}
	return b
}

func tftpErrorPacket(code uint16, msg string) []byte {
	b := []byte{0, tftpERROR, byte(code >> 8), byte(code)}
	b = append(b, msg...)
	return append(b, 0)
}

func parseOptions(b []byte) map[string]string {
	out := map[string]string{}
	parts := bytes.Split(b, []byte{0})
	for i := 0; i+1 < len(parts); i += 2 {
		out[string(bytes.ToLower(parts[i]))] = string(parts[i+1])
	}
	return out
}
