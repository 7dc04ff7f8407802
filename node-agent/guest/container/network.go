package container

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// hostVeth is the host end of a guest's veth pair: derived from the name (interface names
// have at most 15 bytes), so that Stop finds it without any state.
func hostVeth(name string) string {
	h := sha256.Sum256([]byte(name))
	return "otv" + hex.EncodeToString(h[:5])
}

// ipCmd is `ip [-n NETNS] ARGS`.
func ipCmd(netns string, args ...string) []string {
	a := []string{"ip"}
	if netns != "" {
		a = append(a, "-n", netns)
	}
	return append(a, args...)
}

// bridgedCommands are the iproute2 commands that give the process pid (in its own network
// namespace) an eth0 with mac, whose peer host on the host side (or in the named
// namespace netns) is enslaved to bridge. The guest brings eth0 up and runs its DHCP
// client itself.
func bridgedCommands(netns, host, bridge, mac string, pid int) [][]string {
	peer := []string{"link", "add", host, "type", "veth", "peer", "name", "eth0"}
	if mac != "" {
		peer = append(peer, "address", mac)
	}
	peer = append(peer, "netns", strconv.Itoa(pid))
	return [][]string{
		ipCmd(netns, peer...),
		ipCmd(netns, "link", "set", host, "master", bridge),
		ipCmd(netns, "link", "set", host, "up"),
	}
}

func run(ctx context.Context, argv []string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func setupBridged(ctx context.Context, netns, host, bridge, mac string, pid int) error {
	if err := run(ctx, ipCmd(netns, "link", "show", "dev", bridge)); err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	for _, c := range bridgedCommands(netns, host, bridge, mac, pid) {
		if err := run(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// removeVeth deletes the host end if it is still there (it goes by itself with the
// guest's network namespace).
func removeVeth(ctx context.Context, netns, host string) error {
	if run(ctx, ipCmd(netns, "link", "show", "dev", host)) != nil {
		return nil
	}
	err := run(ctx, ipCmd(netns, "link", "del", "dev", host))
	if err != nil && run(ctx, ipCmd(netns, "link", "show", "dev", host)) != nil {
		return nil // went away meanwhile
	}
	return err
}
