package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/sitemgmt/sitefile"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// printChanges shows what a write did (or would do, with --dry-run) as a list, for the
// commands that offer no -o json (see globals.emitChanges).
func printChanges(ch client.Changes) {
	_ = (&globals{}).emitChanges(os.Stdout, ch)
}

func dryQuery(dry bool) url.Values {
	if dry {
		return url.Values{"dryRun": {"true"}}
	}
	return nil
}

// emit prints v as JSON or YAML; for "table" it calls table.
func (g *globals) emit(v any, table func(w *tabwriter.Writer)) error {
	switch g.output {
	case "json":
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		return yaml.NewEncoder(os.Stdout).Encode(v)
	case "table", "":
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	}
	return fmt.Errorf("unknown output format %q (table, json, yaml)", g.output)
}

func newSiteCmd(g *globals) *cobra.Command {
	site := &cobra.Command{Use: "site", Short: "Declarative site file: apply and export"}
	var file string
	var dry bool
	apply := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Make the directory match a site file; shows what changed (idempotent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			s, err := sitefile.Read(f)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var ch client.Changes
			if err := c.Send(http.MethodPut, "/api/v1/site", dryQuery(dry), s, &ch); err != nil {
				return err
			}
			return g.emitChanges(cmd.OutOrStdout(), ch)
		},
	}
	apply.Flags().StringVarP(&file, "file", "f", "", "site file (YAML)")
	apply.Flags().BoolVar(&dry, "dry-run", false, "show the changes without writing them")
	_ = apply.MarkFlagRequired("file")
	export := &cobra.Command{
		Use:   "export",
		Short: "Print the site as a site file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var s model.Site
			if _, err := c.Get("/api/v1/site", nil, &s); err != nil {
				return err
			}
			if g.output == "json" {
				return g.emit(s, nil)
			}
			return sitefile.Write(os.Stdout, &s)
		},
	}
	site.AddCommand(apply, export)
	return site
}

func newModeAtCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mode-at HOST [TIME]",
		Short: "Print the boot mode of HOST at TIME (default now), the deciding rule and the next change",
		Long: `TIME is RFC 3339 (2026-12-01T10:00:00+01:00) or "YYYY-MM-DD HH:MM" in the site's zone.
The first line is the mode alone, so that scripts can read it.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{"host": {args[0]}}
			if len(args) == 2 {
				q.Set("time", args[1])
			}
			var m api.ModeAt
			if _, err := c.Get("/api/v1/mode-at", q, &m); err != nil {
				return err
			}
			if g.output == "json" || g.output == "yaml" {
				return g.emit(m, nil)
			}
			g.useSiteZone(c)
			fmt.Println(m.Mode)
			fmt.Printf("rule: %s\n", m.Rule)
			if m.Next != nil {
				fmt.Printf("next: %s -> %s\n", g.formatTime(*m.Next), m.NextMode)
			} else {
				fmt.Println("next: no change scheduled")
			}
			return nil
		},
	}
}

func newRenderCmd(g *globals) *cobra.Command {
	var bootServer, exportRoot, hostsFile, tftpRoot string
	cmd := &cobra.Command{
		Use:       "render dnsmasq|dnsmasq-hosts|slurm|ganesha|exports",
		Short:     "Print a rendered configuration file",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"dnsmasq", "dnsmasq-hosts", "slurm", "ganesha", "exports"},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			for k, v := range map[string]string{"server": bootServer, "exportRoot": exportRoot, "hostsFile": hostsFile, "tftpRoot": tftpRoot} {
				if v != "" {
					q.Set(k, v)
				}
			}
			data, err := c.Get("/api/v1/render/"+url.PathEscape(args[0]), q, nil)
			if err != nil {
				return err
			}
			_, err = os.Stdout.Write(data)
			return err
		},
	}
	// Not --server: that is the site manager's URL, a global flag.
	cmd.Flags().StringVar(&bootServer, "boot-server", "", "boot server to render for (dnsmasq, ganesha)")
	cmd.Flags().StringVar(&exportRoot, "export-root", "", "directory holding published images (ganesha, exports)")
	cmd.Flags().StringVar(&hostsFile, "hosts-file", "", "path of the dnsmasq hosts file the config points at")
	cmd.Flags().StringVar(&tftpRoot, "tftp-root", "", "TFTP root for dnsmasq")
	return cmd
}

func newWhoamiCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use: "whoami", Short: "Show the authenticated user and their roles", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var who struct {
				UID   string   `json:"uid" yaml:"uid"`
				Roles []string `json:"roles" yaml:"roles"`
			}
			if _, err := c.Get("/api/v1/whoami", nil, &who); err != nil {
				return err
			}
			if g.output == "json" || g.output == "yaml" {
				return emitTo(cmd.OutOrStdout(), g.output, who, nil)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n", who.UID, strings.Join(who.Roles, " "))
			return nil
		},
	}
}

// newScheduleCmd edits weekly rules of a pool or a host.
func newScheduleCmd(g *globals) *cobra.Command {
	sched := &cobra.Command{Use: "schedule", Short: "Weekly rules of a pool or host (e.g. \"mon-fri 08:00-18:00 desktop\")"}
	var pool, host string
	var dry bool
	target := func() (string, error) {
		switch {
		case pool != "" && host == "":
			return "/api/v1/pools/" + url.PathEscape(pool), nil
		case host != "" && pool == "":
			return "/api/v1/hosts/" + url.PathEscape(host), nil
		}
		return "", cmdline.Usagef("give exactly one of --pool or --host")
	}
	// edit fetches the pool or host, changes its rule list and PUTs it back; the server
	// validates the rules and rejects overlaps.
	edit := func(fn func(rules []string) ([]string, error)) error {
		path, err := target()
		if err != nil {
			return err
		}
		c, err := g.client()
		if err != nil {
			return err
		}
		var obj map[string]any
		if _, err := c.Get(path, nil, &obj); err != nil {
			return err
		}
		var rules []string
		if raw, ok := obj["weekly"].([]any); ok {
			for _, r := range raw {
				rules = append(rules, fmt.Sprint(r))
			}
		}
		rules, err = fn(rules)
		if err != nil {
			return err
		}
		obj["weekly"] = rules
		var ch client.Changes
		if err := c.Send(http.MethodPut, path, dryQuery(dry), obj, &ch); err != nil {
			return err
		}
		return g.emitChanges(os.Stdout, ch)
	}
	list := &cobra.Command{Use: "list", Short: "List the weekly rules", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, err := target()
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var obj struct {
				Weekly []string `json:"weekly"`
			}
			if _, err := c.Get(path, nil, &obj); err != nil {
				return err
			}
			if obj.Weekly == nil {
				obj.Weekly = []string{}
			}
			if g.output == "json" || g.output == "yaml" {
				return emitTo(cmd.OutOrStdout(), g.output, obj.Weekly, nil)
			}
			for _, r := range obj.Weekly {
				fmt.Fprintln(cmd.OutOrStdout(), r)
			}
			return nil
		}}
	add := &cobra.Command{Use: "add RULE...", Short: "Add weekly rules", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return edit(func(rules []string) ([]string, error) { return append(rules, args...), nil })
		}}
	remove := &cobra.Command{Use: "remove RULE...", Short: "Remove weekly rules (as listed)", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return edit(func(rules []string) ([]string, error) {
				for _, a := range args {
					i := indexOf(rules, a)
					if i < 0 {
						return nil, fmt.Errorf("no rule %q (see `overtime schedule list`)", a)
					}
					rules = append(rules[:i], rules[i+1:]...)
				}
				if rules == nil {
					rules = []string{}
				}
				return rules, nil
			})
		}}
	for _, c := range []*cobra.Command{list, add, remove} {
		c.Flags().StringVar(&pool, "pool", "", "pool")
		c.Flags().StringVar(&host, "host", "", "host")
	}
	add.Flags().BoolVar(&dry, "dry-run", false, "validate without writing")
	remove.Flags().BoolVar(&dry, "dry-run", false, "validate without writing")
	sched.AddCommand(list, add, remove)
	return sched
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// parseTimeArg parses a flag time for exceptions: RFC 3339, or local "YYYY-MM-DD HH:MM"
// which the server interprets in the site's zone — the CLI asks the server for the zone.
func parseTimeArg(c *client.Client, v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	var set api.Settings
	if _, err := c.Get("/api/v1/site/settings", nil, &set); err != nil {
		return time.Time{}, err
	}
	loc, err := time.LoadLocation(set.Timezone)
	if err != nil {
		return time.Time{}, err
	}
	return api.ParseTime(v, loc)
}
