package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Image distribution commands (docs/publishing.md).

func imageShow(g *globals) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := g.client()
		if err != nil {
			return err
		}
		var st []wire.ImageStatus
		if _, err := c.Get("/api/v1/distribution", url.Values{"image": {args[0]}}, &st); err != nil {
			return err
		}
		if len(st) != 1 {
			return fmt.Errorf("image %s not found", args[0])
		}
		im := st[0]
		g.useSiteZone(c)
		return g.emit(im, func(w *tabwriter.Writer) {
			how := "set by `overtime image current`"
			if !im.Explicit {
				how = "newest; not set"
			}
			fmt.Fprintf(w, "image %s (%s), current: %s (%s)\n", im.Name, im.Kind, orNone(im.Current), how)
			fmt.Fprintln(w, "VERSION\tCURRENT\tSIZE\tCREATED\tVERIFIED ON\tMISSING ON\tKEPT BY")
			for _, v := range im.Versions {
				cur := ""
				if v.Current {
					cur = "*"
				}
				kept := "(nothing: gc removes it)"
				if len(v.Blockers) > 0 {
					kept = keptBy(v.Blockers)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Version, cur, humanBytes(v.Size), g.formatTime(v.Created),
					orNone(strings.Join(v.VerifiedOn, ",")), orNone(strings.Join(v.MissingOn, ",")), kept)
			}
		})
	}
}

func humanBytes(n int64) string {
	switch {
	case n <= 0:
		return "-"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d B", n)
}

func imageCurrentCmd(g *globals) *cobra.Command {
	var dry bool
	cmd := &cobra.Command{
		Use:   "current IMAGE VERSION",
		Short: "Switch the version unpinned modes boot (a rollback is the same command with the old version)",
		Long: `Sets the image's current version: modes, guests and course VMs that do not pin a
version boot it from now on (PCs already running keep what they booted). The switch is
one attribute of the image in the directory, so it is atomic; rolling back is the same
command with the previous version. A boot server that has not verified the version yet
keeps giving its hosts the previous one until it has. VERSION "" returns to "newest".`,
		Example: `  overtime image current debian-desktop 2026.11.21-1
  overtime image current debian-desktop 2026.11.14-1   # roll back`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var ch client.Changes
			if err := c.Send(http.MethodPut, "/api/v1/images/"+url.PathEscape(args[0])+"/current", dryQuery(dry), map[string]string{"version": args[1]}, &ch); err != nil {
				return err
			}
			return g.emitChanges(cmd.OutOrStdout(), ch)
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "validate without writing")
	return cmd
}

func imageGCCmd(g *globals) *cobra.Command {
	var yes, dry bool
	var image string
	cmd := &cobra.Command{
		Use:   "gc [--image IMAGE] [--yes]",
		Short: "Remove image versions nothing references (a dry run unless --yes)",
		Long: `Lists the image versions nothing references any more and, with --yes, removes them
from the catalogue and their directories from the site manager's store; boot servers
delete their copies at their next sync. A version is kept while it is its image's
current version or newer (staged), a mode pins it (and so a rule or exception that uses
the mode), a host boots it now (also as a fallback on a boot server that has not verified
the current version), runs it as its guest, or was last given it by a boot script (a
running PC keeps what it booted). Each kept version is shown with what keeps it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if image != "" {
				q.Set("image", image)
			}
			if dry || !yes {
				q.Set("dryRun", "true")
			}
			var res wire.GCResult
			if err := c.Send(http.MethodPost, "/api/v1/images/gc", q, nil, &res); err != nil {
				return err
			}
			return g.emit(res, func(w *tabwriter.Writer) {
				verb := "removed"
				if res.DryRun {
					verb = "would remove (rerun with --yes)"
				}
				for _, b := range res.Removed {
					fmt.Fprintf(w, "%s\t%s %s\t%s\n", verb, b.Image, b.Version, b.Path)
				}
				if len(res.Removed) == 0 {
					fmt.Fprintln(w, "nothing to remove")
				}
				for _, k := range res.Kept {
					fmt.Fprintf(w, "kept\t%s %s\t%s\n", k.Image, k.Version, keptBy(k.Blockers))
				}
			})
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "remove (without it: only show what would be removed)")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "only show what would be removed (the default)")
	cmd.Flags().StringVar(&image, "image", "", "only this image's versions")
	return cmd
}

// keptBy is what keeps a version, for a table: the first reasons, and how many more
// there are (a current version is booted by every host of the site; -o json has them all).
func keptBy(blockers []string) string {
	const show = 3
	if len(blockers) <= show {
		return strings.Join(blockers, "; ")
	}
	return fmt.Sprintf("%s; and %d more (-o json lists them)", strings.Join(blockers[:show], "; "), len(blockers)-show)
}
