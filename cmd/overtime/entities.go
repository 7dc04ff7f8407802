package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/sitemgmt/sitefile"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// entityCmds are the list/show/add/set/delete commands of the site's entities: one row
// of the table below per entity (its command, API path, table columns and add/set
// flags), built by entity.commands; the entities' own further commands hang below them.
func entityCmds(g *globals) []*cobra.Command {
	var agentFields agentFieldFlags // agentcmds.go: the pool's policy, the mode's guest
	table := []interface{ commands(*globals) *cobra.Command }{
		entity[model.Host]{use: "host", path: "hosts", short: "Hosts (PCs)",
			name: func(h *model.Host) *string { return &h.Name },
			columns: []column[model.Host]{
				{"NAME", func(h *model.Host) string { return h.Name }},
				{"MAC", func(h *model.Host) string { return h.MAC }},
				{"IP", func(h *model.Host) string { return h.IP }},
				{"POOL", func(h *model.Host) string { return h.Pool }},
				{"BOOT SERVER", func(h *model.Host) string { return h.BootServer }},
				{"RULES", func(h *model.Host) string { return strconv.Itoa(len(h.Weekly)) }},
			},
			fields: []field[model.Host]{
				stringField("mac", "MAC address", func(h *model.Host) *string { return &h.MAC }),
				stringField("ip", "IPv4 address", func(h *model.Host) *string { return &h.IP }),
				stringField("pool", "pool", func(h *model.Host) *string { return &h.Pool }),
				stringField("boot-server", "boot server (default: the pool's)", func(h *model.Host) *string { return &h.BootServer }),
				listField("rule", "weekly rule, repeatable (replaces the list)", func(h *model.Host) *[]string { return &h.Weekly }),
			},
			listFilters: []listFilter{{flag: "pool", usage: "only hosts of this pool", param: "pool"}},
			more: func(g *globals) []*cobra.Command {
				return []*cobra.Command{importCmd(g), newHostCredentialCmd(g),
					newHostPowerCmd(g, wire.OpReboot), newHostPowerCmd(g, wire.OpPowerOff), newHostPowerCmd(g, wire.OpWake), newHostPowerStatusCmd(g)}
			},
		},
		entity[model.Pool]{use: "pool", path: "pools", short: "Pools (rooms)",
			name: func(p *model.Pool) *string { return &p.Name },
			columns: []column[model.Pool]{
				{"NAME", func(p *model.Pool) string { return p.Name }},
				{"ROOM", func(p *model.Pool) string { return p.Room }},
				{"BOOT SERVER", func(p *model.Pool) string { return p.BootServer }},
				{"RULES", func(p *model.Pool) string { return strconv.Itoa(len(p.Weekly)) }},
				{"DESCRIPTION", func(p *model.Pool) string { return p.Description }},
			},
			fields: []field[model.Pool]{
				stringField("room", "room", func(p *model.Pool) *string { return &p.Room }),
				stringField("description", "description", func(p *model.Pool) *string { return &p.Description }),
				stringField("boot-server", "boot server", func(p *model.Pool) *string { return &p.BootServer }),
				listField("rule", "weekly rule, repeatable (replaces the list)", func(p *model.Pool) *[]string { return &p.Weekly }),
				{bind: agentFields.policyFlags, apply: func(f *pflag.FlagSet, _ *client.Client, p *model.Pool) error { return agentFields.applyPolicy(f, p) }},
			},
		},
		entity[model.Mode]{use: "mode", path: "modes", short: "Boot modes",
			name: func(m *model.Mode) *string { return &m.Name },
			columns: []column[model.Mode]{
				{"NAME", func(m *model.Mode) string { return m.Name }},
				{"KIND", func(m *model.Mode) string { return string(m.Kind) }},
				{"IMAGE", func(m *model.Mode) string { return m.Image }},
				{"VERSION", func(m *model.Mode) string { return m.ImageVersion }},
				{"KERNEL ARGS", func(m *model.Mode) string { return m.KernelArgs }},
			},
			fields: []field[model.Mode]{
				stringField("kind", "desktop, cluster, course-vm, local-disk or maintenance", func(m *model.Mode) *model.ModeKind { return &m.Kind }),
				stringField("image", "image", func(m *model.Mode) *string { return &m.Image }),
				stringField("image-version", "pinned image version (default: newest)", func(m *model.Mode) *string { return &m.ImageVersion }),
				stringField("kernel", "kernel path under the boot server's files/ (default: the image's)", func(m *model.Mode) *string { return &m.Kernel }),
				stringField("initrd", "initrd path under files/", func(m *model.Mode) *string { return &m.Initrd }),
				stringField("kernel-args", "extra kernel arguments", func(m *model.Mode) *string { return &m.KernelArgs }),
				stringField("vm", "course-vm modes: the course-vm image started full screen (its newest version)", func(m *model.Mode) *string { return &m.VM }),
				stringField("description", "description", func(m *model.Mode) *string { return &m.Description }),
				{bind: agentFields.guestFlags, apply: func(f *pflag.FlagSet, _ *client.Client, m *model.Mode) error { return agentFields.applyGuest(f, m) }},
			},
		},
		entity[model.Image]{use: "image", path: "images", short: "Images (immutable versions: see `image publish`)",
			name: func(im *model.Image) *string { return &im.Name },
			columns: []column[model.Image]{
				{"NAME", func(im *model.Image) string { return im.Name }},
				{"KIND", func(im *model.Image) string { return string(im.Kind) }},
				{"POOL", func(im *model.Image) string { return im.Pool }},
				{"VERSIONS", func(im *model.Image) string { return strconv.Itoa(len(im.Versions)) }},
				{"CURRENT", imageCurrentCell},
			},
			fields: []field[model.Image]{
				stringField("kind", "desktop, compute or course-vm", func(im *model.Image) *model.ImageKind { return &im.Kind }),
				stringField("pool", "owning pool (course-vm images)", func(im *model.Image) *string { return &im.Pool }),
				stringField("description", "description", func(im *model.Image) *string { return &im.Description }),
			},
			showShort: "Show an image: versions, current, sizes, where each is verified, what keeps it from gc",
			showRun:   imageShow,
			more: func(g *globals) []*cobra.Command {
				return []*cobra.Command{publishCmd(g), imageImportCmd(g), imageCurrentCmd(g), imageGCCmd(g)}
			},
		},
		entity[model.BootServer]{use: "bootserver", path: "bootservers", short: "Boot servers (Remote Boot Service)",
			name: func(b *model.BootServer) *string { return &b.Name },
			columns: []column[model.BootServer]{
				{"NAME", func(b *model.BootServer) string { return b.Name }},
				{"IP", func(b *model.BootServer) string { return b.IP }},
				{"HTTP URL", func(b *model.BootServer) string { return b.HTTPURL }},
				{"DHCP", func(b *model.BootServer) string { return string(b.DHCP) }},
				{"SUBNET", func(b *model.BootServer) string { return b.Subnet }},
			},
			fields: []field[model.BootServer]{
				stringField("ip", "server IPv4 address", func(b *model.BootServer) *string { return &b.IP }),
				stringField("url", "HTTP base URL of overtime serve as seen by clients", func(b *model.BootServer) *string { return &b.HTTPURL }),
				stringField("subnet", "subnet served (CIDR)", func(b *model.BootServer) *string { return &b.Subnet }),
				stringField("dhcp", "full or proxy", func(b *model.BootServer) *model.DHCPMode { return &b.DHCP }),
				stringField("range-from", "dynamic range start (full DHCP)", func(b *model.BootServer) *string { return &b.RangeFrom }),
				stringField("range-to", "dynamic range end", func(b *model.BootServer) *string { return &b.RangeTo }),
				stringField("router", "default gateway handed out", func(b *model.BootServer) *string { return &b.Router }),
				dnsServersField(),
				stringField("domain", "DNS domain handed out (full DHCP), e.g. lab.example.org", func(b *model.BootServer) *string { return &b.Domain }),
				stringField("interface", "interface dnsmasq listens on", func(b *model.BootServer) *string { return &b.Interface }),
				stringField("nfs-server", "NFS server for images (default: ip)", func(b *model.BootServer) *string { return &b.NFSServer }),
				stringField("nfs-root", "NFS export holding images", func(b *model.BootServer) *string { return &b.NFSRoot }),
			},
		},
		entity[model.Exception]{use: "exception", path: "exceptions", short: "Dated exceptions (exam, lecture, holiday)", hasTimes: true,
			name: func(e *model.Exception) *string { return &e.Name },
			columns: []column[model.Exception]{
				{"NAME", func(e *model.Exception) string { return e.Name }},
				{"KIND", func(e *model.Exception) string { return string(e.Kind) }},
				{"START", func(e *model.Exception) string { return g.formatTime(e.Start) }},
				{"END", func(e *model.Exception) string { return g.formatTime(e.End) }},
				{"MODE", func(e *model.Exception) string { return e.Mode }},
				{"TARGETS", exceptionTargetsCell},
				{"OWNER", exceptionOwnerCell},
			},
			fields: []field[model.Exception]{
				stringField("kind", "exam, lecture, holiday, maintenance or other", func(e *model.Exception) *model.ExceptionKind { return &e.Kind }),
				timeField("start", "start (RFC 3339 or 'YYYY-MM-DD HH:MM' in the site's zone)", func(e *model.Exception) *time.Time { return &e.Start }),
				timeField("end", "end (exclusive)", func(e *model.Exception) *time.Time { return &e.End }),
				stringField("mode", "mode during the exception", func(e *model.Exception) *string { return &e.Mode }),
				stringField("description", "description", func(e *model.Exception) *string { return &e.Description }),
				targetsField(),
				listField("allow", "exams: what the PCs may reach besides what they need (host, address or network[:port]), repeatable (replaces the list)", func(e *model.Exception) *[]string { return &e.Allow }),
			},
		},
		entity[model.RoleGrant]{use: "role", path: "roles", short: "Role grants (site-admin, pool-admin, lecturer, viewer, boot-server)",
			name: func(r *model.RoleGrant) *string { return &r.Name },
			columns: []column[model.RoleGrant]{
				{"NAME", func(r *model.RoleGrant) string { return r.Name }},
				{"ROLE", func(r *model.RoleGrant) string { return string(r.Role) }},
				{"POOL", func(r *model.RoleGrant) string { return r.Pool }},
				{"BOOT SERVER", func(r *model.RoleGrant) string { return r.BootServer }},
				{"MEMBERS", func(r *model.RoleGrant) string { return strings.Join(r.Members, ",") }},
			},
			fields: []field[model.RoleGrant]{
				stringField("role", "site-admin, pool-admin, lecturer, viewer or boot-server", func(r *model.RoleGrant) *model.RoleKind { return &r.Role }),
				stringField("pool", "pool (pool-admin, lecturer)", func(r *model.RoleGrant) *string { return &r.Pool }),
				stringField("boot-server", "boot server (boot-server role: the account its `overtime bootserver run` uses)", func(r *model.RoleGrant) *string { return &r.BootServer }),
				listField("member", "member uid, repeatable (replaces the list)", func(r *model.RoleGrant) *[]string { return &r.Members }),
			},
		},
	}
	cmds := make([]*cobra.Command, len(table))
	for i, e := range table {
		cmds[i] = e.commands(g)
	}
	return cmds
}

// imageCurrentCell is the version an image boots: its current one, else its newest.
func imageCurrentCell(im *model.Image) string {
	cur := ""
	if v := im.Version(""); v != nil {
		cur = v.Version
		if im.Current == "" {
			cur += " (newest)"
		}
	}
	return cur
}

// exceptionTargetsCell lists an exception's targets as pool:NAME and host:NAME.
func exceptionTargetsCell(e *model.Exception) string {
	var t []string
	for _, x := range e.Targets {
		if x.Pool != "" {
			t = append(t, "pool:"+x.Pool)
		} else {
			t = append(t, "host:"+x.Host)
		}
	}
	return strings.Join(t, ",")
}

// exceptionOwnerCell is who booked an exception, or what manages it.
func exceptionOwnerCell(e *model.Exception) string {
	owner := e.Owner // who booked it; site apply leaves bookings alone
	switch {
	case owner != "":
	case e.Kind == model.ExceptionPowerSave:
		owner = "(power saving)"
	default:
		owner = "(site file)"
	}
	return owner
}

// entity is one row of entityCmds' table: the list/show/add/set/delete commands of one
// kind of the site's entities. add and set share the fields' flags: add starts from an
// empty value, set from the current one, and only flags the user gave are applied.
type entity[T any] struct {
	use, path, short string
	name             func(v *T) *string // the key field: set from the NAME argument
	columns          []column[T]        // of list's table
	fields           []field[T]         // the flags of add and set, applied in this order
	listFilters      []listFilter       // list's flags that narrow the list
	hasTimes         bool               // rows show times: list asks for the site's zone (useSiteZone)
	// showShort and showRun replace the generic show (which prints the entity as YAML).
	showShort string
	showRun   func(g *globals) func(cmd *cobra.Command, args []string) error
	more      func(g *globals) []*cobra.Command // the entity's further commands
}

// column is one column of an entity's list table: its heading and its cell of a value.
type column[T any] struct {
	head string
	cell func(v *T) string
}

// field is one or more flags of an entity's add and set commands (bind declares them on
// each command's flag set) and how the given ones change the value (apply).
type field[T any] struct {
	bind  func(f *pflag.FlagSet)
	apply func(f *pflag.FlagSet, c *client.Client, v *T) error
}

// listFilter is a flag of an entity's list command that, when given, becomes a query
// parameter of the list request (host list --pool P: GET /api/v1/hosts?pool=P).
type listFilter struct {
	flag, usage, param string
}

// stringField is a string flag that, when given, replaces the field dst points to (a
// string or a string kind such as model.ModeKind).
func stringField[T any, K ~string](name, usage string, dst func(v *T) *K) field[T] {
	var val string
	return field[T]{
		bind: func(f *pflag.FlagSet) { f.StringVar(&val, name, "", usage) },
		apply: func(f *pflag.FlagSet, _ *client.Client, v *T) error {
			if f.Changed(name) {
				*dst(v) = K(val)
			}
			return nil
		},
	}
}

// listField is a repeatable flag whose values, when given, replace the list dst points to.
func listField[T any](name, usage string, dst func(v *T) *[]string) field[T] {
	var vals []string
	return field[T]{
		bind: func(f *pflag.FlagSet) { f.StringArrayVar(&vals, name, nil, usage) },
		apply: func(f *pflag.FlagSet, _ *client.Client, v *T) error {
			if f.Changed(name) {
				*dst(v) = vals
			}
			return nil
		},
	}
}

// timeField is a time flag read as parseTimeArg reads it (RFC 3339, or a local time in
// the site's zone, which it asks the server for).
func timeField[T any](name, usage string, dst func(v *T) *time.Time) field[T] {
	var val string
	return field[T]{
		bind: func(f *pflag.FlagSet) { f.StringVar(&val, name, "", usage) },
		apply: func(f *pflag.FlagSet, c *client.Client, v *T) error {
			if f.Changed(name) {
				t, err := parseTimeArg(c, val)
				if err != nil {
					return err
				}
				*dst(v) = t
			}
			return nil
		},
	}
}

// dnsServersField is bootserver's --dns-server: repeatable, replacing the list, and
// --dns-server ” clears it.
func dnsServersField() field[model.BootServer] {
	var vals []string
	return field[model.BootServer]{
		bind: func(f *pflag.FlagSet) {
			f.StringArrayVar(&vals, "dns-server", nil, "DNS server handed out (full DHCP), repeatable, at most 3, in order (replaces the list; --dns-server '' clears it)")
		},
		apply: func(f *pflag.FlagSet, _ *client.Client, b *model.BootServer) error {
			if f.Changed("dns-server") {
				b.DNSServers = slices.DeleteFunc(slices.Clone(vals), func(d string) bool { return d == "" })
			}
			return nil
		},
	}
}

// targetsField is exception's --pool and --host: given either, they replace the targets.
func targetsField() field[model.Exception] {
	var pools, hosts []string
	return field[model.Exception]{
		bind: func(f *pflag.FlagSet) {
			f.StringArrayVar(&pools, "pool", nil, "target pool, repeatable")
			f.StringArrayVar(&hosts, "host", nil, "target host, repeatable")
		},
		apply: func(f *pflag.FlagSet, _ *client.Client, e *model.Exception) error {
			if f.Changed("pool") || f.Changed("host") {
				e.Targets = nil
				for _, p := range pools {
					e.Targets = append(e.Targets, model.Target{Pool: p})
				}
				for _, h := range hosts {
					e.Targets = append(e.Targets, model.Target{Host: h})
				}
			}
			return nil
		},
	}
}

func (e entity[T]) flags(f *pflag.FlagSet) {
	for _, x := range e.fields {
		x.bind(f)
	}
}

func (e entity[T]) apply(f *pflag.FlagSet, c *client.Client, v *T) error {
	for _, x := range e.fields {
		if err := x.apply(f, c, v); err != nil {
			return err
		}
	}
	return nil
}

func (e entity[T]) header() string {
	heads := make([]string, len(e.columns))
	for i, col := range e.columns {
		heads[i] = col.head
	}
	return strings.Join(heads, "\t")
}

func (e entity[T]) row(v *T) string {
	cells := make([]string, len(e.columns))
	for i, col := range e.columns {
		cells[i] = col.cell(v)
	}
	return strings.Join(cells, "\t")
}

func (e entity[T]) commands(g *globals) *cobra.Command {
	root := &cobra.Command{Use: e.use, Short: e.short}
	base := "/api/v1/" + e.path
	var dry bool
	filters := make([]string, len(e.listFilters))
	list := &cobra.Command{Use: "list", Short: "List", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var q url.Values
			for i, lf := range e.listFilters {
				if filters[i] != "" {
					if q == nil {
						q = url.Values{}
					}
					q.Set(lf.param, filters[i])
				}
			}
			var all []T
			if _, err := c.Get(base, q, &all); err != nil {
				return err
			}
			if e.hasTimes {
				g.useSiteZone(c)
			}
			return g.emit(all, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, e.header())
				for i := range all {
					fmt.Fprintln(w, e.row(&all[i]))
				}
			})
		}}
	for i, lf := range e.listFilters {
		list.Flags().StringVar(&filters[i], lf.flag, "", lf.usage)
	}
	show := &cobra.Command{Use: "show NAME", Short: "Show one", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var v T
			if _, err := c.Get(base+"/"+url.PathEscape(args[0]), nil, &v); err != nil {
				return err
			}
			if g.output == "table" {
				g.output = "yaml"
			}
			return g.emit(v, nil)
		}}
	if e.showRun != nil {
		show.Short, show.RunE = e.showShort, e.showRun(g)
	}
	upsert := func(create bool) func(cmd *cobra.Command, args []string) error {
		return func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			path := base + "/" + url.PathEscape(args[0])
			var v T
			if create {
				if _, err := c.Get(path, nil, nil); err == nil {
					return fmt.Errorf("%s %s already exists (use `overtime %s set`)", e.use, args[0], e.use)
				}
			} else if _, err := c.Get(path, nil, &v); err != nil {
				return err
			}
			if err := e.apply(cmd.Flags(), c, &v); err != nil {
				return err
			}
			*e.name(&v) = args[0]
			var ch client.Changes
			if err := c.Send(http.MethodPut, path, dryQuery(dry), &v, &ch); err != nil {
				return err
			}
			return g.emitChanges(cmd.OutOrStdout(), ch)
		}
	}
	add := &cobra.Command{Use: "add NAME", Short: "Add", Args: cobra.ExactArgs(1), RunE: upsert(true)}
	setC := &cobra.Command{Use: "set NAME", Short: "Change the given fields", Args: cobra.ExactArgs(1), RunE: upsert(false)}
	e.flags(add.Flags())
	e.flags(setC.Flags())
	del := &cobra.Command{Use: "delete NAME", Short: "Delete", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var ch client.Changes
			if err := c.Send(http.MethodDelete, base+"/"+url.PathEscape(args[0]), dryQuery(dry), nil, &ch); err != nil {
				return err
			}
			return g.emitChanges(cmd.OutOrStdout(), ch)
		}}
	for _, c := range []*cobra.Command{add, setC, del} {
		c.Flags().BoolVar(&dry, "dry-run", false, "validate and show the changes without writing")
	}
	root.AddCommand(list, show, add, setC, del)
	if e.more != nil {
		root.AddCommand(e.more(g)...)
	}
	return root
}

func importCmd(g *globals) *cobra.Command {
	var dry, yes bool
	cmd := &cobra.Command{
		Use:   "import FILE.csv",
		Short: "Add or update hosts from a CSV file; shows the changes first and asks before writing",
		Long: `Adds or updates hosts from a CSV file ("-" reads standard input). Columns are
name,mac,ip,pool[,bootServer] in this order, or in any order under a header row naming
them; ',' ';' or tab separated (taken from the first line), quoted fields, a UTF-8 BOM and
CRLF line ends are fine. Hosts not in the file are left alone.

The file is checked and the server validates the whole change before anything is written;
the command then shows what would change (hosts added, changed field by field, unchanged)
and, on a terminal, asks for confirmation. Without a terminal to ask on (scripts, cron,
FILE "-") it writes only with --yes.`,
		Example: `  overtime host import hosts.csv --dry-run   # only show the changes
  overtime host import hosts.csv             # show, ask, write
  overtime host import hosts.csv --yes       # show and write without asking (scripts)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readFileOrStdin(args[0])
			if err != nil {
				return err
			}
			// Parse locally first: a bad row is reported by line without a round trip.
			hosts, err := sitefile.ParseHostsCSV(bytes.NewReader(data))
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			// The server's dry run validates and authorises the whole change; the preview
			// is only shown for a change it would accept.
			var plan client.Changes
			if err := c.SendRaw(http.MethodPost, "/api/v1/hosts/import", dryQuery(true), "text/csv", bytes.NewReader(data), &plan); err != nil {
				return err
			}
			var cur []model.Host
			if _, err := c.Get("/api/v1/hosts", nil, &cur); err != nil {
				return err
			}
			printImportPreview(os.Stdout, args[0], cur, hosts)
			if dry || len(plan.Changes) == 0 {
				return nil
			}
			if !yes {
				if args[0] == "-" || !isTerminal(os.Stdin) {
					return fmt.Errorf("nothing written: no terminal to confirm %d changes on; rerun with --yes to write them (--dry-run only shows them)", len(plan.Changes))
				}
				fmt.Print("Write these changes? [y/N] ")
				answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					return fmt.Errorf("import cancelled, nothing written")
				}
			}
			var ch client.Changes
			if err := c.SendRaw(http.MethodPost, "/api/v1/hosts/import", nil, "text/csv", bytes.NewReader(data), &ch); err != nil {
				return err
			}
			printChanges(ch)
			return nil
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "check the file and show the changes without writing")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "write without asking (needed when stdin is not a terminal)")
	return cmd
}

func readFileOrStdin(name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(name)
}

// isTerminal reports whether f is a terminal (a TCGETS ioctl succeeds), so that a
// question is only asked where someone can answer it. /dev/null, also a character
// device, is not one.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// printImportPreview shows what importing hosts would do to cur: each added host, each
// changed host with its changed fields (old -> new), and how many stay as they are.
func printImportPreview(w io.Writer, file string, cur, hosts []model.Host) {
	byName := make(map[string]*model.Host, len(cur))
	for i := range cur {
		byName[cur[i].Name] = &cur[i]
	}
	var lines []string
	added, changed, same := 0, 0, 0
	for _, h := range hosts {
		// The server canonicalises MACs when it writes; compare and show them the way
		// it will store them (the file was checked, so this cannot fail).
		if mac, err := model.NormalizeMAC(h.MAC); err == nil {
			h.MAC = mac
		}
		old := byName[h.Name]
		if old == nil {
			added++
			lines = append(lines, fmt.Sprintf("  + host %s (mac %s, ip %s, pool %s%s)", h.Name, h.MAC, orNone(h.IP), h.Pool, bootServerNote(h.BootServer)))
			continue
		}
		var diffs []string
		for _, f := range []struct{ name, old, new string }{
			{"mac", old.MAC, h.MAC}, {"ip", old.IP, h.IP}, {"pool", old.Pool, h.Pool}, {"bootServer", old.BootServer, h.BootServer},
		} {
			if f.old != f.new {
				diffs = append(diffs, fmt.Sprintf("%s %s -> %s", f.name, orNone(f.old), orNone(f.new)))
			}
		}
		if len(diffs) == 0 {
			same++
			continue
		}
		changed++
		lines = append(lines, fmt.Sprintf("  ~ host %s: %s", h.Name, strings.Join(diffs, ", ")))
	}
	fmt.Fprintf(w, "%s: %d to add, %d to change, %d unchanged\n", file, added, changed, same)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func bootServerNote(bs string) string {
	if bs == "" {
		return ""
	}
	return ", boot server " + bs
}

// publishCmd publishes a new immutable image version. With --dir (a build of
// images/build.sh) it verifies the build against its SHA256SUMS, uploads every artefact
// to the site manager's image store and publishes them there (boot servers then pull
// them); without --dir it only records a version whose files an administrator placed in
// the store or on the boot servers, in the version's own directory IMAGE/VERSION (the
// server derives it; --path, when given, must say the same). With --file the checksum and size are computed from the root image
// itself, so they cannot be mistyped.
func publishCmd(g *globals) *cobra.Command {
	var sum, path, file, dir string
	var size int64
	var dry bool
	cmd := &cobra.Command{
		Use:   "publish IMAGE VERSION (--dir BUILD | --file root.squashfs | --sha256 HEX --size N)",
		Short: "Publish a new immutable version of an image",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case dir != "" && (path != "" || file != "" || sum != ""):
				return cmdline.Usagef("--dir uploads a build: it takes no --path, --file or --sha256")
			case dir == "" && file == "" && sum == "":
				return cmdline.Usagef("give --dir BUILD (upload a build) or --file root.squashfs / --sha256 HEX --size N (record files already in IMAGE/VERSION on the boot servers)")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if dir != "" {
				return publishDir(cmd, g, c, args[0], args[1], dir, dry)
			}
			if file != "" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				h := sha256.New()
				n, err := io.Copy(h, f)
				if err != nil {
					return err
				}
				sum, size = hex.EncodeToString(h.Sum(nil)), n
			}
			v := model.ImageVersion{Version: args[1], SHA256: sum, Size: size, Path: path}
			var ch client.Changes
			if err := c.Send(http.MethodPost, "/api/v1/images/"+url.PathEscape(args[0])+"/versions", dryQuery(dry), v, &ch); err != nil {
				return err
			}
			return g.emitChanges(cmd.OutOrStdout(), ch)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "a build directory (images/build.sh, make images): verified, uploaded and published as IMAGE/VERSION")
	cmd.Flags().StringVar(&path, "path", "", "directory of the version under the image root: always IMAGE/VERSION, which the server fills in when this is not given")
	cmd.Flags().StringVar(&file, "file", "", "root image file to checksum")
	cmd.Flags().StringVar(&sum, "sha256", "", "sha256 of the root image")
	cmd.Flags().Int64Var(&size, "size", 0, "size in bytes")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "validate without writing")
	return cmd
}

// publishDir uploads a build that verifies against its SHA256SUMS and publishes it.
func publishDir(cmd *cobra.Command, g *globals, c *client.Client, image, version, dir string, dry bool) error {
	files, err := artefact.Verify(dir)
	if err != nil {
		return fmt.Errorf("the build in %s does not verify, nothing published: %w", dir, err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	return uploadAndPublish(cmd, g, c, image, version, dir, names, "", dry)
}
