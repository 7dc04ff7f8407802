package agent

// The configuration's side of the decision loop: fetching it (fetchLoop), refusing a
// document the agent must not act on (checkConfig), keeping the last good one in tmpfs,
// and what the desktop session is told of the configuration in force (the course VM to
// show, the exam marker).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/node-agent/coursevm"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/slurmcompat"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// checkConfig refuses a configuration the agent must not act on: a document for another
// PC (a token copied to the wrong machine), an invalid policy or guest. The previous
// configuration stays in force.
func checkConfig(c *wire.AgentConfig, mac string) error {
	if c == nil {
		return fmt.Errorf("empty configuration")
	}
	if err := names.Hostname(c.Host); err != nil {
		return err
	}
	if mac != "" && !strings.EqualFold(c.MAC, mac) {
		return fmt.Errorf("configuration is for host %s (MAC %s), this PC has MAC %s", c.Host, c.MAC, mac)
	}
	if !model.ModeKind(c.Kind).NeedsImage() && c.Kind != model.KindLocalDisk {
		return fmt.Errorf("unknown mode kind %q", c.Kind)
	}
	if err := c.Policy.Validate(); err != nil {
		return err
	}
	// The engine needs every field set: a server that sends a partial policy gets it
	// completed with the defaults rather than zero thresholds.
	c.Policy = c.Policy.Effective()
	if g := c.Guest; g != nil {
		if err := g.Guest.Validate(); err != nil {
			return err
		}
		g.Guest = g.Guest.WithDefaults()
		if !strings.HasPrefix(g.Name, "overtime-") || len(g.Name) > 63 {
			return fmt.Errorf("guest name %q must start with overtime-", g.Name)
		}
		if err := names.Hostname(g.Name); err != nil {
			return fmt.Errorf("guest name: %w", err)
		}
		if err := names.RelPath("image path", g.Resolved.Path); err != nil {
			return err
		}
	}
	if n := c.ExamNetwork; n != nil {
		// An exam network the agent cannot render whole is refused with the rest of the
		// document: loading part of it would be a guess at what the exam allows.
		if err := n.Check(); err != nil {
			return err
		}
	}
	if v := c.SlurmctldVersion; v != "" {
		// Validated by the site manager; a start is refused by it, so checked again.
		if err := slurmcompat.Valid(v); err != nil {
			return fmt.Errorf("slurmctldVersion: %w", err)
		}
	}
	if vm := c.CourseVM; vm != nil {
		if err := names.Name("course VM image", vm.Image); err != nil {
			return err
		}
		if err := names.RelPath("course VM path", vm.Resolved.Path); err != nil {
			return err
		}
	}
	return nil
}

// loadCache reads the last good configuration from the agent's tmpfs state directory.
func loadCache(path string) (*wire.AgentConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c wire.AgentConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &c, nil
}

// writeAtomic replaces path with data (atomicfile): a reader (or a restarted agent) sees
// the old or the new file, never half of one.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// GuestMAC is the guest NIC's address: the host's MAC with the locally-administered bit
// set. Unique per PC and stable across reboots, so the site's DHCP can reserve an address
// for the guest of each desktop (bridged networking).
func GuestMAC(hostMAC string) (string, error) {
	hw, err := net.ParseMAC(hostMAC)
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("invalid host MAC %q", hostMAC)
	}
	g := make(net.HardwareAddr, 6)
	copy(g, hw)
	g[0] = (g[0] | 0x02) &^ 0x01
	if g.String() == hw.String() {
		// Already locally administered (a VM desktop): flip the next bit instead.
		g[0] ^= 0x04
	}
	return g.String(), nil
}

// DefaultMAC is the MAC of the interface that carries the default route (the one the PC
// booted from), else of the first non-loopback interface with one.
func DefaultMAC() (string, error) {
	if b, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) > 2 && f[1] == "00000000" {
				if ifc, err := net.InterfaceByName(f[0]); err == nil && len(ifc.HardwareAddr) == 6 {
					return ifc.HardwareAddr.String(), nil
				}
			}
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback == 0 && len(ifc.HardwareAddr) == 6 {
			return ifc.HardwareAddr.String(), nil
		}
	}
	return "", fmt.Errorf("no network interface with a MAC address")
}

// examInForce is c as the exam's lockdown and network limit see it: an exam only in the
// exam's own boot (Options.BootedExam), or at once on a PC Overtime did not boot; before
// the restart into the exam, c without it (what the countdown's session needs: its home
// on the file server, which the exam's network blocks). Said once per exam.
func (a *Agent) examInForce(c *wire.AgentConfig) *wire.AgentConfig {
	if !c.Exam || a.o.Booted == "" || a.o.BootedExam {
		a.examWaits = false
		return c
	}
	if !a.examWaits {
		a.log.Info("exam: the lockdown and the network limit wait for the exam's boot", "mode", c.Mode, "booted", a.o.Booted)
		a.examWaits = true
	}
	before := *c
	before.Exam, before.ExamNetwork = false, nil
	return &before
}

// examMarker tells the desktop it is in an exam (overtime-exam.path locks it down) by a
// small file that exists exactly while an exam is in force (examInForce). It is rewritten only
// when its content changes: every write starts the lockdown again (a systemd reload, a
// logind reload), and the configuration is fetched every minute.
func (a *Agent) examMarker(c *wire.AgentConfig) {
	if a.o.ExamFile == "" {
		return
	}
	if !c.Exam {
		if err := os.Remove(a.o.ExamFile); err != nil && !os.IsNotExist(err) {
			a.log.Error("exam marker not removed", "file", a.o.ExamFile, "err", err)
		}
		return
	}
	doc := struct {
		Mode  string    `json:"mode"`
		Label string    `json:"label,omitempty"`
		Until time.Time `json:"until,omitzero"`
	}{c.Mode, c.Label, c.NextChange}
	b, _ := json.Marshal(doc)
	b = append(b, '\n')
	if old, err := os.ReadFile(a.o.ExamFile); err == nil && bytes.Equal(old, b) {
		return
	}
	if err := os.MkdirAll(filepath.Dir(a.o.ExamFile), 0o755); err == nil {
		err = atomicfile.WriteFile(a.o.ExamFile, b, 0o644)
		if err != nil {
			a.log.Error("exam marker not written", "file", a.o.ExamFile, "err", err)
		}
	}
}

// fetchLoop gets the configuration now, at the schedule's next change and every Refresh.
func (a *Agent) fetchLoop(ctx context.Context) {
	failing := false
	for {
		wait := a.o.Refresh
		c, err := a.o.Site.AgentConfig(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				a.log.Warn("site manager unreachable; keeping the last good configuration", "err", err)
			}
			failing = true
			wait = min(wait, 15*time.Second)
		default:
			if failing {
				a.log.Info("site manager reachable again")
			}
			failing = false
			if err := checkConfig(c, a.o.MAC); err != nil {
				a.m.rejected.Inc()
				a.log.Error("configuration from the site manager refused; keeping the previous one", "err", err)
				break
			}
			if b, err := json.Marshal(c); err == nil {
				if err := writeAtomic(a.cachePath(), b); err != nil {
					a.log.Warn("caching the configuration", "err", err)
				}
			}
			select {
			case a.configs <- configUpdate{c, "api"}:
			case <-ctx.Done():
				return
			}
			if !c.NextChange.IsZero() {
				if d := c.NextChange.Sub(c.Generated) + time.Second; d > 0 && d < wait {
					wait = d
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// publishCourseVM tells the session's course-VM player what to show: the course VM of a
// course-vm mode in the read-only image export, or nothing (the file removed). A failure
// is logged; the player keeps what it showed.
func (a *Agent) publishCourseVM(ctx context.Context, c *wire.AgentConfig) {
	if a.o.CourseVMFile == "" {
		return
	}
	spec := CourseVMSpec(c, a.o.ImageRoot)
	if spec != nil && spec.Dir != "" && c.CourseVM.NFS != "" {
		// The player reads the version directory: mount it from the boot server first.
		if err := ensureImage(ctx, a.log, spec.Dir, c.CourseVM.NFS, artefact.SumsFile); err != nil {
			a.log.Error("course VM image", "err", err)
			spec = &coursevm.Spec{Mode: c.Mode, Image: c.CourseVM.Image, Unavailable: err.Error()}
		}
	}
	if err := coursevm.WriteSpec(a.o.CourseVMFile, spec); err != nil {
		a.log.Error("course VM spec not written", "file", a.o.CourseVMFile, "err", err)
	}
}

// CourseVMSpec is what the course-VM player shows under configuration c (nil: nothing).
func CourseVMSpec(c *wire.AgentConfig, imageRoot string) *coursevm.Spec {
	if c.Kind != model.KindCourseVM {
		return nil
	}
	if c.CourseVM == nil {
		why := c.CourseVMUnavailable
		if why == "" {
			why = "the site manager named no course VM"
		}
		return &coursevm.Spec{Mode: c.Mode, Unavailable: why}
	}
	if imageRoot == "" {
		return &coursevm.Spec{Mode: c.Mode, Image: c.CourseVM.Image, Unavailable: "no image root (mount the image export and pass --image-root)"}
	}
	v := c.CourseVM.Resolved
	return &coursevm.Spec{Mode: c.Mode, Image: c.CourseVM.Image, Version: v.Version,
		Dir: filepath.Join(imageRoot, filepath.FromSlash(v.Path)), URL: c.CourseVM.ImageURL}
}

func (a *Agent) setConfigSource(from string) {
	a.cfgFrom = from
	setOne(a.m.configFrom, []string{"api", "cache", "none"}, from)
}

func (a *Agent) cachePath() string { return filepath.Join(a.o.StateDir, "config.json") }
