package bootserver

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/netns"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/sitemgmt/wake"
	"github.com/overtime-hpc/overtime/sitemgmt/wol"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// TestWakeBeforeLecture: lab-a's Wednesday 10:00 lecture needs its PCs, which are off
// (no heartbeat). At 09:57:30 on the site manager's clock, the boot server's wake round
// sends each of them a magic packet from its own network namespace, to its subnet's
// broadcast address, where a UDP listener on the PCs' LAN (another namespace, through a
// veth on the boot server's bridge) receives it. The boot server reports them sent, and
// the next round sends nothing.
func TestWakeBeforeLecture(t *testing.T) {
	needs.Servers(t, "root (network namespaces)")
	server, err := netns.New("ot-wk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close() })
	lan, err := netns.New("ot-wkc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lan.Close() })
	if err := server.AddBridge("br0", "10.20.0.1/24"); err != nil {
		t.Fatal(err)
	}
	if err := server.AddVeth("vc0", "br0", lan, "eth0", "10.20.0.50/24"); err != nil {
		t.Fatal(err)
	}
	conn, err := lan.ListenPacket("udp4", "0.0.0.0:9")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	got := make(chan []byte, 64)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			got <- bytes.Clone(buf[:n])
		}
	}()

	berlin, _ := time.LoadLocation("Europe/Berlin")
	env := testenv.New(t, testenv.Options{Now: time.Date(2026, 12, 2, 9, 57, 30, 0, berlin)})
	env.ApplyExample(t)
	admin := env.Admin()
	if err := admin.Send("POST", "/api/v1/users", nil, api.UserRequest{UID: "bs1", Password: "bs1-secret"}, nil); err != nil {
		t.Fatal(err)
	}
	grant := model.RoleGrant{Name: "bs1-account", Role: model.RoleBootServer, BootServer: "bs1", Members: []string{"bs1"}}
	if err := admin.Send("PUT", "/api/v1/roles/bs1-account", nil, grant, nil); err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Client: env.Client("bs1", "bs1-secret"), Name: "bs1", Dial: server.DialContext,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))}

	want := map[string][]byte{}
	for _, h := range env.Svc.Snapshot().Site.Hosts {
		if h.Pool == "lab-a" && h.Name != "pc-a05" { // pc-a05 is a desktop all day: no change at 10:00
			want[h.Name], _ = wol.MagicPacket(h.MAC)
		}
	}
	sent, err := cfg.WakeOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for host := range want {
		if !slices.ContainsFunc(sent, func(id string) bool { return strings.HasPrefix(id, "sched-"+host+"-") }) {
			t.Errorf("no scheduled wake of %s sent; sent %v", host, sent)
		}
	}
	// Every host's packet arrives on the LAN (each is sent three times).
	seen := map[string]bool{}
	poll.Until(t, "magic packets on the pool's LAN", 10*time.Second, func() bool {
		for {
			select {
			case p := <-got:
				for host, pkt := range want {
					if bytes.Equal(p, pkt) {
						seen[host] = true
					}
				}
				continue
			default:
			}
			break
		}
		return len(seen) == len(want)
	})
	t.Logf("09:57:30, lecture at 10:00 (lead %s, no boot time measured): magic packets for %d PCs received on 10.20.0.0/24", wake.DefaultBoot+wake.Margin, len(seen))

	list := env.Svc.Power.Commands("pc-a01")
	if len(list) != 1 || list[0].State != wire.CommandSent || list[0].By != "schedule" || !strings.Contains(list[0].Reason, "course-bio101") {
		t.Fatalf("pc-a01's scheduled wake: %+v", list)
	}
	again, err := cfg.WakeOnce(context.Background())
	if err != nil || len(again) != 0 {
		t.Fatalf("second round sent %v (%v)", again, err)
	}
	if pw := env.Svc.Power.Commands("pc-a05"); len(pw) != 0 {
		t.Errorf("pc-a05 (no change at 10:00) was woken: %+v", pw)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
