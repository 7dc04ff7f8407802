package examfw

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// lab is a PC, the exam server and another host on one switch (a bridge in a namespace of
// its own), each with an IPv4 and an IPv6 address.
type lab struct {
	pc, exam, other *netns.NS
}

const (
	pcIP, examIP, otherIP = "10.88.0.10", "10.88.0.20", "10.88.0.30"
	pcIP6, examIP6        = "2001:db8:88::10", "2001:db8:88::20"
	otherIP6              = "2001:db8:88::30"
)

func newLab(t *testing.T) *lab {
	t.Helper()
	needs.Servers(t, "root (network namespaces)", "nft (Debian package nftables)")
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft: %v (scripts/deps.sh installs nftables)", err)
	}
	ns := func(prefix string) *netns.NS {
		n, err := netns.New(prefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		return n
	}
	sw := ns("ot-exsw")
	if err := sw.AddBridge("br0", ""); err != nil {
		t.Fatal(err)
	}
	l := &lab{pc: ns("ot-expc"), exam: ns("ot-exsrv"), other: ns("ot-exoth")}
	for _, h := range []struct {
		n       *netns.NS
		veth    string
		ip, ip6 string
	}{{l.pc, "vpc", pcIP, pcIP6}, {l.exam, "vexam", examIP, examIP6}, {l.other, "voth", otherIP, otherIP6}} {
		if err := sw.AddVeth(h.veth, "br0", h.n, "eth0", h.ip+"/24"); err != nil {
			t.Fatal(err)
		}
		// nodad: the address is usable at once, not after duplicate detection.
		if err := h.n.IP("addr", "add", h.ip6+"/64", "dev", "eth0", "nodad"); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// echo serves TCP on addr in n: every connection gets back what it sends.
func echo(t *testing.T, n *netns.NS, addr string) {
	t.Helper()
	l, err := n.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}

// reach says whether from can open a TCP connection to addr and get its bytes echoed
// back (the answer is the established direction) within a second.
func reach(from *netns.NS, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := from.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("exam")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "exam" {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// TestExamNetworkNetns loads the rendered ruleset into a PC's namespace with the real
// nft: the exam server answers on its allowed port (IPv4 and IPv6, the answers come
// back), the same server on another port and another host do not, nothing may connect
// to the PC; deleting the table gives the PC its network back.
func TestExamNetworkNetns(t *testing.T) {
	l := newLab(t)
	for _, a := range []string{examIP + ":8443", examIP + ":9000", "[" + examIP6 + "]:8443", "[" + examIP6 + "]:9000"} {
		echo(t, l.exam, a)
	}
	echo(t, l.other, otherIP+":8443")
	echo(t, l.other, "["+otherIP6+"]:8443")
	echo(t, l.pc, pcIP+":2222")
	all := []struct {
		from *netns.NS
		addr string
		exam bool // reachable during the exam
	}{
		{l.pc, examIP + ":8443", true},
		{l.pc, "[" + examIP6 + "]:8443", true},
		{l.pc, examIP + ":9000", false},
		{l.pc, "[" + examIP6 + "]:9000", false},
		{l.pc, otherIP + ":8443", false},
		{l.pc, "[" + otherIP6 + "]:8443", false},
		{l.other, pcIP + ":2222", false}, // inbound: nobody connects to an exam PC
		{l.exam, pcIP + ":2222", false},  // not even the exam server
	}
	check := func(phase string, inExam bool) {
		t.Helper()
		for _, c := range all {
			err := reach(c.from, c.addr)
			if want := !inExam || c.exam; (err == nil) != want {
				t.Errorf("%s: %s → %s: err %v, want reachable %v", phase, c.from.Name, c.addr, err, want)
			}
		}
	}
	check("before the exam", false)

	fw := &NFT{File: filepath.Join(t.TempDir(), "exam.nft"), Command: func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return l.pc.CommandContext(ctx, name, args...)
	}}
	targets, skipped := Resolve(context.Background(), nil, &wire.ExamNetwork{Allow: []wire.ExamEndpoint{
		{Endpoint: examIP + ":8443", For: wire.ExamForExam},
		{Endpoint: "[" + examIP6 + "]:8443", For: wire.ExamForExam},
	}})
	if len(skipped) > 0 {
		t.Fatal(skipped)
	}
	ctx := context.Background()
	if err := fw.Apply(ctx, Render(targets)); err != nil {
		t.Fatal(err)
	}
	out, err := l.pc.Command("nft", "list", "table", "inet", Table).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ip daddr "+examIP+" meta l4proto { tcp, udp } th dport 8443 accept") {
		t.Fatalf("nft list table: %v\n%s", err, out)
	}
	check("during the exam", true)
	// Loading again (a changed allow list) replaces the table in one transaction.
	if err := fw.Apply(ctx, Render(targets)); err != nil {
		t.Fatal(err)
	}
	check("after a reload", true)

	if err := fw.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := l.pc.Command("nft", "list", "tables").CombinedOutput(); err != nil || strings.Contains(string(out), Table) {
		t.Fatalf("after Remove: %v\n%s", err, out)
	}
	check("after the exam", false)
	if err := fw.Remove(ctx); err != nil {
		t.Errorf("a second Remove: %v", err)
	}
}

// Every golden ruleset is one nft accepts (checked, not loaded).
func TestGoldenRulesetsParse(t *testing.T) {
	l := newLab(t)
	files, _ := filepath.Glob("testdata/*.golden")
	if len(files) == 0 {
		t.Fatal("no golden files")
	}
	for _, f := range files {
		abs, _ := filepath.Abs(f)
		if out, err := l.pc.Command("nft", "-c", "-f", abs).CombinedOutput(); err != nil {
			t.Errorf("nft -c -f %s: %v\n%s", f, err, out)
		}
	}
}
