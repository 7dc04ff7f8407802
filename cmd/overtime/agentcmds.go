package main

// Node agent commands: host credentials (under `overtime host`), the agent status and
// configuration views (attached under `overtime agent` by agent.go), and the flags that
// edit a pool's sharing policy and a mode's compute guest from a file (entities.go).
// See docs/agent-api.md.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/overtime-hpc/overtime/internal/atomicfile"
	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// newHostCredentialCmd is `overtime host credential HOST [--out FILE] [--revoke]`.
func newHostCredentialCmd(g *globals) *cobra.Command {
	var out string
	var revoke bool
	cmd := &cobra.Command{
		Use:   "credential HOST [--out FILE] [--revoke]",
		Short: "Issue (or revoke) the node agent credential of a host",
		Long: `Issues a new bearer token for HOST's node agent; the site manager keeps only its
SHA-256, so the token is shown this once. A new credential replaces the previous one.
With --out the token is written to FILE (mode 0600, atomically: the file is complete or
absent), else printed on stdout. Deliver it to the desktop as the node agent's
credential file (docs/agent-api.md). --revoke removes the host's credential.
Site admins, and admins of the host's pool, may do this.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			host := args[0]
			if revoke && out != "" {
				return cmdline.Usagef("--revoke and --out exclude each other")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if revoke {
				had, err := c.RevokeHostCredential(cmd.Context(), host)
				if err != nil {
					return err
				}
				if g.output == "json" || g.output == "yaml" {
					return emitTo(w, g.output, map[string]any{"host": host, "revoked": had}, nil)
				}
				if had {
					fmt.Fprintf(w, "credential of host %s revoked\n", host)
				} else {
					fmt.Fprintf(w, "host %s had no credential\n", host)
				}
				return nil
			}
			if out != "" {
				// Refuse a path we cannot write before the old credential is replaced.
				if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
					return fmt.Errorf("--out %s: directory %s does not exist", out, filepath.Dir(out))
				}
			}
			cred, err := c.CreateHostCredential(cmd.Context(), host)
			if err != nil {
				return err
			}
			if out != "" {
				if err := writeSecretFile(out, client.Credential{Token: cred.Token, CAPin: cred.CAPin}.File()); err != nil {
					return fmt.Errorf("the new credential of host %s could not be saved (issue it again): %w", host, err)
				}
				if g.output == "json" || g.output == "yaml" {
					return emitTo(w, g.output, map[string]any{"host": host, "file": out}, nil)
				}
				fmt.Fprintf(w, "credential of host %s written to %s (mode 0600); any previous credential no longer works\n", host, out)
				return nil
			}
			switch g.output {
			case "json", "yaml":
				return emitTo(w, g.output, cred, nil)
			}
			fmt.Fprintln(w, cred.Token)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the token to this file (mode 0600) instead of printing it")
	cmd.Flags().BoolVar(&revoke, "revoke", false, "revoke the host's credential")
	return cmd
}

// writeSecretFile writes data to path with mode 0600 atomically (atomicfile): readers see
// the old file or the whole new one, never a partial token, and the token is never
// readable by others.
func writeSecretFile(path, data string) error {
	return atomicfile.WriteFile(path, []byte(data), 0o600)
}

// emitTo is globals.emit for a given writer.
func emitTo(w io.Writer, format string, v any, table func(w *tabwriter.Writer)) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		return yaml.NewEncoder(w).Encode(v)
	case "table", "":
		if table == nil {
			return emitTo(w, "yaml", v, nil)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	}
	return fmt.Errorf("unknown output format %q (table, json, yaml)", format)
}

// newAgentStatusCmd is `status [HOST]`: the last heartbeats the site manager received.
func newAgentStatusCmd(g *globals) *cobra.Command {
	var pool string
	cmd := &cobra.Command{
		Use:   "status [HOST]",
		Short: "Last node agent heartbeats (stale: none for more than 90 s)",
		Long: `Lists the last heartbeat of every host whose node agent posted one since the site
manager started (heartbeats are kept in memory), or of HOST. STALE means no heartbeat
for more than three intervals (90 s).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var list []wire.AgentStatus
			var v any
			if len(args) == 1 {
				st, err := c.AgentStatusOf(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				list, v = []wire.AgentStatus{*st}, st
			} else {
				if list, err = c.AgentStatus(cmd.Context(), pool); err != nil {
					return err
				}
				v = list
			}
			g.useSiteZone(c)
			return emitTo(cmd.OutOrStdout(), g.output, v, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "HOST\tMODE\tOWNER\tACTION\tGUEST\tPRESSURE\tCONFIG\tLAST HEARTBEAT\tSTALE")
				for _, s := range list {
					guest := s.GuestState
					if s.GuestReason != "" {
						guest += " (" + s.GuestReason + ")"
					}
					stale := "no"
					if s.Stale {
						stale = "yes"
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s\t%s\t%s\n", s.Host, dash(s.Mode), dash(string(s.OwnerState)),
						dash(string(s.Action)), dash(guest), s.Pressure, dash(s.ConfigFrom), g.formatTime(s.Received), stale)
				}
				if len(args) == 1 {
					agentDetail(w, g, list[0])
				}
			})
		},
	}
	cmd.Flags().StringVar(&pool, "pool", "", "only hosts of this pool")
	return cmd
}

// agentDetail adds to one host's status what the adaptive controller reports and the
// host's last calibration (lines without tabs: the table above keeps its columns).
func agentDetail(w io.Writer, g *globals, s wire.AgentStatus) {
	fmt.Fprintln(w)
	if s.Slowdown > 0 || s.Cap > 0 {
		guestCap := "none"
		if s.Cap > 0 {
			guestCap = fmt.Sprintf("%.0f%% of the CPUs", 100*s.Cap)
		}
		fmt.Fprintf(w, "Desktop slowdown now: %s (controller's estimate); guest CPU cap: %s\n", pct(s.Slowdown), guestCap)
	}
	p := s.Interference
	if p == nil {
		fmt.Fprintln(w, "Calibration: none (the agent calibrates when the PC is idle in a cluster mode)")
		return
	}
	fmt.Fprintf(w, "Calibration: measured %s on %s, %d CPUs (%s), cgroup %s, backend %s\n", g.formatTime(p.Measured),
		dash(p.Kernel), p.CPUs, dash(p.CPUModel), dash(p.Cgroup), dash(p.Backend))
	fmt.Fprintf(w, "  desktop slowdown next to a full-speed guest: CPU-bound %s, memory-bound %s\n", pct(p.CPUSlowdown), pct(p.MemorySlowdown))
	fmt.Fprintf(w, "  wake-up latency p99: %.0f µs alone, %.0f µs next to the guest\n", p.WakeupP99AloneUs, p.WakeupP99GuestUs)
	fmt.Fprintf(w, "  controller starts at a guest cap of %.0f%% (guest keeps %.0f%% of its work)\n", 100*p.StartCap, 100*p.Harvest)
}

// pct formats a fraction as a percentage with one decimal.
func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// newAgentConfigCmd is `config --host HOST`: the configuration the host's node agent
// gets now, as JSON (what GET /api/v1/agent/config answers the agent).
func newAgentConfigCmd(g *globals) *cobra.Command {
	var host string
	cmd := &cobra.Command{
		Use:   "config --host HOST",
		Short: "Print the configuration a host's node agent gets now (JSON)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			cfg, err := c.AgentConfigFor(cmd.Context(), host)
			if err != nil {
				return err
			}
			if g.output == "yaml" {
				return emitTo(cmd.OutOrStdout(), "yaml", cfg, nil)
			}
			return emitTo(cmd.OutOrStdout(), "json", cfg, nil)
		},
	}
	cmd.Flags().StringVar(&host, "host", "", "host name")
	_ = cmd.MarkFlagRequired("host")
	return cmd
}

// agentFieldFlags edit the structured agent fields of pools and modes from a file:
// `pool add|set --policy-file FILE | --no-policy`, `mode add|set --guest-file FILE |
// --no-guest`. The file is YAML (or JSON, which YAML reads too) holding the policy or the
// guest as in the site file; unknown keys are refused.
type agentFieldFlags struct {
	policyFile, guestFile string
	noPolicy, noGuest     bool
}

func (a *agentFieldFlags) policyFlags(f *pflag.FlagSet) {
	f.StringVar(&a.policyFile, "policy-file", "", "sharing policy from a YAML/JSON file (- for stdin; replaces the policy)")
	f.BoolVar(&a.noPolicy, "no-policy", false, "remove the policy (the pool gets the default policy)")
}

func (a *agentFieldFlags) applyPolicy(f *pflag.FlagSet, p *model.Pool) error {
	switch {
	case f.Changed("policy-file") && a.noPolicy:
		return errors.New("--policy-file and --no-policy exclude each other")
	case a.noPolicy:
		p.Policy = nil
	case f.Changed("policy-file"):
		var pol model.Policy
		if err := readStructFile(a.policyFile, "policy", &pol); err != nil {
			return err
		}
		p.Policy = &pol
	}
	return nil
}

func (a *agentFieldFlags) guestFlags(f *pflag.FlagSet) {
	f.StringVar(&a.guestFile, "guest-file", "", "compute guest from a YAML/JSON file (- for stdin; replaces the guest)")
	f.BoolVar(&a.noGuest, "no-guest", false, "remove the compute guest")
}

func (a *agentFieldFlags) applyGuest(f *pflag.FlagSet, m *model.Mode) error {
	switch {
	case f.Changed("guest-file") && a.noGuest:
		return errors.New("--guest-file and --no-guest exclude each other")
	case a.noGuest:
		m.Guest = nil
	case f.Changed("guest-file"):
		var g model.Guest
		if err := readStructFile(a.guestFile, "guest", &g); err != nil {
			return err
		}
		m.Guest = &g
	}
	return nil
}

// readStructFile decodes one YAML (or JSON) document strictly into v.
func readStructFile(path, what string, v any) error {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("%s file: %w", what, err)
		}
		defer f.Close()
		r = f
	}
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s file %s is empty", what, path)
		}
		return fmt.Errorf("%s file %s: %s", what, path, strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return nil
}
