// Package netns makes throwaway network namespaces for the tests and benchmarks that put
// real servers (dnsmasq, nfs-ganesha, overtime serve) and QEMU guests on a private
// network: a bridge with the boot server's address, tap devices for VMs, veth pairs for
// load generators. Nothing here touches the host's own namespace except to create and
// delete the named namespaces (iproute2's `ip netns`).
//
// Processes are put into a namespace with `ip netns exec` (Command); sockets of the
// calling Go process are created inside one by Dial and Listen, which switch a locked OS
// thread into the namespace for the socket() call only: a socket stays in the namespace
// it was created in, whichever thread uses it afterwards.
package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// NS is a named network namespace (/run/netns/NAME).
type NS struct {
	Name string
}

// New creates a namespace with a unique name starting with prefix and brings its
// loopback up. Close deletes it.
func New(prefix string) (*NS, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := prefix + "-" + hex.EncodeToString(b[:])
	if len(name) > 32 {
		name = name[:32]
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	n := &NS{Name: name}
	if err := n.IP("link", "set", "lo", "up"); err != nil {
		_ = n.Close()
		return nil, err
	}
	return n, nil
}

// Close kills every process left in the namespace and deletes it.
func (n *NS) Close() error {
	if out, err := exec.Command("ip", "netns", "pids", n.Name).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
	}
	out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", n.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Command is exec.Command for a program run inside the namespace.
func (n *NS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// CommandContext is Command with a context.
func (n *NS) CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
}

// Run runs a command in the namespace and returns its combined output in the error.
func (n *NS) Run(name string, args ...string) error {
	out, err := n.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s (netns %s): %v: %s", name, strings.Join(args, " "), n.Name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// IP runs `ip ARGS` in the namespace.
func (n *NS) IP(args ...string) error {
	out, err := exec.Command("ip", append([]string{"-n", n.Name}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip -n %s %s: %v: %s", n.Name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// AddBridge creates a bridge with the address cidr (e.g. "10.20.0.1/24", "" for none)
// and brings it up. Forwarding delay 0: a VM's first DHCP packet must not be dropped
// while the port is still "learning".
func (n *NS) AddBridge(name, cidr string) error {
	if err := n.IP("link", "add", name, "type", "bridge", "forward_delay", "0", "stp_state", "0"); err != nil {
		return err
	}
	if cidr != "" {
		if err := n.IP("addr", "add", cidr, "dev", name); err != nil {
			return err
		}
	}
	return n.IP("link", "set", name, "up")
}

// AddTap creates a tap device for QEMU (-netdev tap,ifname=NAME,script=no,downscript=no)
// and attaches it to bridge.
func (n *NS) AddTap(name, bridge string) error {
	if err := n.IP("tuntap", "add", "dev", name, "mode", "tap"); err != nil {
		return err
	}
	if err := n.IP("link", "set", name, "master", bridge); err != nil {
		return err
	}
	return n.IP("link", "set", name, "up")
}

// AddVeth creates a veth pair: local (in n, attached to bridge when bridge != "") and
// peer moved into the namespace other with the address cidr, both up.
func (n *NS) AddVeth(local, bridge string, other *NS, peer, cidr string) error {
	if err := n.IP("link", "add", local, "type", "veth", "peer", "name", peer, "netns", other.Name); err != nil {
		return err
	}
	if bridge != "" {
		if err := n.IP("link", "set", local, "master", bridge); err != nil {
			return err
		}
	}
	if err := n.IP("link", "set", local, "up"); err != nil {
		return err
	}
	if cidr != "" {
		if err := other.IP("addr", "add", cidr, "dev", peer); err != nil {
			return err
		}
	}
	return other.IP("link", "set", peer, "up")
}

// do runs fn on an OS thread that is inside the namespace, and returns the thread to the
// caller's namespace afterwards.
func (n *NS) do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := os.Open("/run/netns/" + n.Name)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", n.Name, err)
	}
	ferr := fn()
	if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the wrong namespace: keep it locked so that the runtime
		// throws it away instead of reusing it (UnlockOSThread is not called twice).
		runtime.LockOSThread()
		return fmt.Errorf("setns back: %w", err)
	}
	return ferr
}

// DialContext connects from inside the namespace.
func (n *NS) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	// The socket is created (and the connect started) on the switched thread; Go's
	// dialer does the socket() call on the calling goroutine's thread.
	err := n.do(func() error {
		var err error
		d := net.Dialer{Timeout: 10 * time.Second}
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen creates a listener inside the namespace.
func (n *NS) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() error {
		var err error
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// ListenPacket creates a packet socket inside the namespace.
func (n *NS) ListenPacket(network, addr string) (net.PacketConn, error) {
	var c net.PacketConn
	err := n.do(func() error {
		var err error
		c, err = net.ListenPacket(network, addr)
		return err
	})
	return c, err
}

// HTTPClient is an HTTP client whose connections are made inside the namespace.
func (n *NS) HTTPClient() *http.Client {
	return &http.Client{
		Timeout:   60 * time.Second,
		Transport: &http.Transport{DialContext: n.DialContext, DisableKeepAlives: false, MaxIdleConnsPerHost: 16},
	}
}

// NetCommand runs a program in the namespace's network only (nsenter --net). Unlike
// `ip netns exec` it keeps the caller's mounts: ip netns exec remounts /sys, which hides
// /sys/fs/cgroup from programs that manage cgroups (the node agent).
func (n *NS) NetCommand(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + n.Name, "--", name}, args...)...)
}
