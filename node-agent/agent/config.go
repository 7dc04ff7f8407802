package agent

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
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
