package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/client"
)

// outputAnnotation lists, comma-separated, the -o formats besides "table" a command
// offers. A command without it prints one fixed form (a rendered config file, a
// server's log) and refuses -o json and -o yaml, so that a script never gets a table
// where it asked for JSON.
const outputAnnotation = "overtime/output"

// structuredOutput are the commands that offer -o json and -o yaml, by path below the
// root. Entity commands (host list, pool show, ...) are added for every kind.
var structuredOutput = []string{
	"version", "whoami", "mode-at",
	"site apply", "site export",
	"schedule list", "schedule add", "schedule remove",
	"user list",
	"agent status", "agent config",
	"job-report",
	"slurm nodes", "slurm resume", "slurm suspend",
	"host credential", "host reboot", "host poweroff", "host wake", "host power-status",
	"audit",
	"image publish", "image import", "image current", "image gc",
}

// entityKinds are the commands entityCmds builds; their list, show, add, set and delete
// offer structured output (add, set and delete print the changes).
var entityKinds = []string{"host", "pool", "mode", "image", "bootserver", "exception", "role"}

func declareOutputFormats(root *cobra.Command) {
	paths := slices.Clone(structuredOutput)
	for _, k := range entityKinds {
		for _, verb := range []string{"list", "show", "add", "set", "delete"} {
			paths = append(paths, k+" "+verb)
		}
	}
	for _, p := range paths {
		c, rest, err := root.Find(strings.Fields(p))
		if err != nil || len(rest) > 0 || c == root {
			panic("structuredOutput names no command: " + p) // a programming error, caught by the tests
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[outputAnnotation] = "json,yaml"
	}
}

// offersOutput reports whether cmd offers the -o format.
func offersOutput(cmd *cobra.Command, format string) bool {
	if format == "table" || format == "" {
		return true
	}
	return slices.Contains(strings.Split(cmd.Annotations[outputAnnotation], ","), format)
}

// checkOutputFlag refuses an unknown -o format, and json or yaml on a command that does
// not offer it.
func checkOutputFlag(cmd *cobra.Command, format string) error {
	switch format {
	case "table", "", "json", "yaml":
	default:
		return cmdline.Usagef("unknown output format %q (table, json, yaml)", format)
	}
	if !offersOutput(cmd, format) {
		return cmdline.Usagef("%s does not offer -o %s: it has only its own output form", cmd.CommandPath(), format)
	}
	return nil
}

// emitChanges prints what a write did (or would do, with --dry-run): a list for people,
// the server's answer as it is for -o json and yaml.
func (g *globals) emitChanges(w io.Writer, ch client.Changes) error {
	if g.output == "json" || g.output == "yaml" {
		return emitTo(w, g.output, ch, nil)
	}
	switch {
	case len(ch.Changes) == 0:
		fmt.Fprintln(w, "no changes")
	case ch.DryRun:
		fmt.Fprintln(w, "would change (dry run):")
	}
	for _, c := range ch.Changes {
		fmt.Fprintln(w, "  "+c)
	}
	return nil
}

// tableTime is the one form of times in table output: the site's time zone (in which
// weekly rules and exceptions are written), named, to the second. JSON and YAML keep
// RFC 3339 (what encoding/json writes).
const tableTime = "2006-01-02 15:04:05 MST"

// formatTime formats t for a table, in the site's zone once useSiteZone found it, else
// in the local one.
func (g *globals) formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	loc := g.zone
	if loc == nil {
		loc = time.Local
	}
	return t.In(loc).Format(tableTime)
}

// useSiteZone asks the site manager for the site's time zone before a table with times
// is printed. Callers that may not read the settings (users without a role) keep the
// local zone, which formatTime names, so no time is ever ambiguous.
func (g *globals) useSiteZone(c *client.Client) {
	if g.output != "table" && g.output != "" {
		return
	}
	var set api.Settings
	if _, err := c.Get("/api/v1/site/settings", nil, &set); err != nil {
		return
	}
	if loc, err := time.LoadLocation(set.Timezone); err == nil {
		g.zone = loc
	}
}

// versionStamp is the default name of an imported image version: the UTC instant in the
// version alphabet (2026.12.02-093005). A name, not a time shown to people, so not
// formatTime's form.
func versionStamp(t time.Time) string { return t.UTC().Format("2006.01.02-150405") }

// queryTime is t as a query parameter for the server (RFC 3339), never shown to people:
// they get formatTime.
func queryTime(t time.Time) string { return t.Format(time.RFC3339) }
