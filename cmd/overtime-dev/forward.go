package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/netns"
)

// newForwardCmd forwards a loopback port into a network namespace, so that the demo's
// site manager, which runs inside the namespace next to the PXE-booted VMs, answers the
// CLI and curl on 127.0.0.1 as it would on a real boot server.
func newForwardCmd() *cobra.Command {
	var listen, to, ns string
	cmd := &cobra.Command{
		Use:   "forward",
		Short: "Forward a local TCP port to an address inside a network namespace (demo)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := &netns.NS{Name: ns}
			if _, err := os.Stat("/run/netns/" + ns); err != nil {
				return fmt.Errorf("network namespace %s: %w", ns, err)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() { <-ctx.Done(); ln.Close() }()
			for {
				c, err := ln.Accept()
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				go func() {
					defer c.Close()
					up, err := n.DialContext(ctx, "tcp", to)
					if err != nil {
						return
					}
					defer up.Close()
					go func() { _, _ = io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
					_, _ = io.Copy(c, up)
				}()
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "local address")
	f.StringVar(&to, "to", "", "address inside the namespace")
	f.StringVar(&ns, "netns", "", "network namespace name (/run/netns/NAME)")
	_ = cmd.MarkFlagRequired("to")
	_ = cmd.MarkFlagRequired("netns")
	return cmd
}
