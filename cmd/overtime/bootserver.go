package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/boot/bootserver"
	"github.com/overtime-hpc/overtime/internal/paths"
)

func newBootServerCmd(g *globals) *cobra.Command {
	var cfg bootserver.Config
	cmd := &cobra.Command{
		Use:   "run --name NAME",
		Short: "Run a boot server: dnsmasq (DHCP/proxy-DHCP + TFTP) and NFS exports configured by the site manager",
		Long: `Runs dnsmasq, and optionally nfs-ganesha (--nfs ganesha) or the kernel NFS server's
export list (--nfs kernel), for the boot server --name of the site. Configuration comes
from the site manager (--server, with a viewer account: --user/--password-file); it is
re-fetched every --refresh, host changes reach dnsmasq by SIGHUP without dropping leases,
and the last good configuration in --state-dir keeps serving while the site manager is
unreachable. Boot scripts, kernels and initrds come from 'overtime serve' over HTTP.

With --sync-images (the default) it also pulls the published image versions its hosts
need from the site manager's store into --export-root, verifies each against its
SHA256SUMS and the catalogue's sha256 before it counts, deletes versions it fetched once
they are no longer published, and reports what it holds; hosts are only given versions
their boot server reported. Reporting needs a boot-server role for --name on the
account. See docs/boot.md and docs/publishing.md.

With --wake (the default) it sends the Wake-on-LAN magic packets the site manager asks
for: 'overtime host wake' commands and the wakes before a scheduled mode that needs a PC
that is off (the pool's measured boot time ahead), to the broadcast address of its
subnet, and reports them sent (also needs the boot-server role). See docs/operations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			cfg.Client = c
			cfg.Log = slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("bootserver", cfg.Name)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return bootserver.Run(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Name, "name", os.Getenv("OVERTIME_BOOTSERVER"), "this boot server's name in the site ($OVERTIME_BOOTSERVER)")
	f.StringVar(&cfg.StateDir, "state-dir", paths.BootServerState, "last good configuration and dnsmasq leases")
	f.StringVar(&cfg.TFTPRoot, "tftp-root", paths.TFTPRoot, "TFTP root; receives the first-stage loaders")
	f.DurationVar(&cfg.Refresh, "refresh", 5*time.Second, "how often to fetch the configuration")
	f.StringVar(&cfg.NFS, "nfs", bootserver.NFSNone, "NFS server to configure: ganesha, kernel or none")
	f.StringVar(&cfg.ExportRoot, "export-root", paths.ImageExport, "published image tree to export")
	f.StringVar(&cfg.ExportsFile, "exports-file", paths.KernelNFSExports, "kernel NFS: the exports file to manage")
	f.StringVar(&cfg.Clients, "nfs-clients", "*", "kernel NFS: who may mount (exports(5) client, e.g. 10.20.0.0/24)")
	f.StringVar(&cfg.Dnsmasq, "dnsmasq", "", "path of dnsmasq (default: from PATH)")
	f.BoolVar(&cfg.SyncImages, "sync-images", true, "pull the image versions this boot server's hosts need from the site manager into --export-root, verify and report them (needs a boot-server role; docs/publishing.md)")
	f.BoolVar(&cfg.StormTuning, "storm-tuning", true, "tune for a room of PCs switched on at once: raise the kernel limits (socket receive buffer, ARP table; host-wide, needs root) and the open-file limit before dnsmasq starts, run dnsmasq at a higher priority with a larger log pipe (docs/boot.md \"Boot storms\")")
	f.BoolVar(&cfg.Wake, "wake", true, "send the Wake-on-LAN packets the site manager asks for and report them (needs a boot-server role; docs/operations.md)")
	return cmd
}
