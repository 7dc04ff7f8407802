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

// entity describes the list/show/add/set/delete commands of one kind. add and set share
// the flags: add starts from an empty value, set from the current one, and only flags the
// user gave are applied.
type entity[T any] struct {
	use, path, short string
	header           string
	row              func(v *T) string
	flags            func(f *pflag.FlagSet)
	apply            func(f *pflag.FlagSet, c *client.Client, v *T) error
	listQuery        func() url.Values
	hasTimes         bool // rows show times: list asks for the site's zone (useSiteZone)
}

func entityCmds(g *globals) []*cobra.Command {
	var (
		mac, ip, pool, bootServer, room, desc, kind, image, imageVersion, kernel, initrd, kargs string
		httpURL, subnet, dhcp, rangeFrom, rangeTo, router, iface, nfsServer, nfsRoot, domain    string
		start, end, mode, role, vm                                                              string
		rules, pools, hosts, members, dnsServers                                                []string
		listPool                                                                                string
		agentFields                                                                             agentFieldFlags // agentcmds.go
	)
	host := entity[model.Host]{use: "host", path: "hosts", short: "Hosts (PCs)",
		header: "NAME\tMAC\tIP\tPOOL\tBOOT SERVER\tRULES",
		row: func(h *model.Host) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d", h.Name, h.MAC, h.IP, h.Pool, h.BootServer, len(h.Weekly))
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&mac, "mac", "", "MAC address")
			f.StringVar(&ip, "ip", "", "IPv4 address")
			f.StringVar(&pool, "pool", "", "pool")
			f.StringVar(&bootServer, "boot-server", "", "boot server (default: the pool's)")
			f.StringArrayVar(&rules, "rule", nil, "weekly rule, repeatable (replaces the list)")
		},
		apply: func(f *pflag.FlagSet, _ *client.Client, h *model.Host) error {
			set(f, "mac", &h.MAC, mac)
			set(f, "ip", &h.IP, ip)
			set(f, "pool", &h.Pool, pool)
			set(f, "boot-server", &h.BootServer, bootServer)
			if f.Changed("rule") {
				h.Weekly = rules
			}
			return nil
		},
		listQuery: func() url.Values {
			if listPool != "" {
				return url.Values{"pool": {listPool}}
			}
			return nil
		},
	}
	poolE := entity[model.Pool]{use: "pool", path: "pools", short: "Pools (rooms)",
		header: "NAME\tROOM\tBOOT SERVER\tRULES\tDESCRIPTION",
		row: func(p *model.Pool) string {
			return fmt.Sprintf("%s\t%s\t%s\t%d\t%s", p.Name, p.Room, p.BootServer, len(p.Weekly), p.Description)
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&room, "room", "", "room")
			f.StringVar(&desc, "description", "", "description")
			f.StringVar(&bootServer, "boot-server", "", "boot server")
			f.StringArrayVar(&rules, "rule", nil, "weekly rule, repeatable (replaces the list)")
			agentFields.policyFlags(f)
		},
		apply: func(f *pflag.FlagSet, _ *client.Client, p *model.Pool) error {
			set(f, "room", &p.Room, room)
			set(f, "description", &p.Description, desc)
			set(f, "boot-server", &p.BootServer, bootServer)
			if f.Changed("rule") {
				p.Weekly = rules
			}
			return agentFields.applyPolicy(f, p)
		},
	}
	modeE := entity[model.Mode]{use: "mode", path: "modes", short: "Boot modes",
		header: "NAME\tKIND\tIMAGE\tVERSION\tKERNEL ARGS",
		row: func(m *model.Mode) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", m.Name, m.Kind, m.Image, m.ImageVersion, m.KernelArgs)
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&kind, "kind", "", "desktop, cluster, course-vm, local-disk or maintenance")
			f.StringVar(&image, "image", "", "image")
			f.StringVar(&imageVersion, "image-version", "", "pinned image version (default: newest)")
			f.StringVar(&kernel, "kernel", "", "kernel path under the boot server's files/ (default: the image's)")
			f.StringVar(&initrd, "initrd", "", "initrd path under files/")
			f.StringVar(&kargs, "kernel-args", "", "extra kernel arguments")
			f.StringVar(&vm, "vm", "", "course-vm modes: the course-vm image started full screen (its newest version)")
			f.StringVar(&desc, "description", "", "description")
			agentFields.guestFlags(f)
		},
		apply: func(f *pflag.FlagSet, _ *client.Client, m *model.Mode) error {
			setKind(f, "kind", &m.Kind, kind)
			set(f, "image", &m.Image, image)
			set(f, "image-version", &m.ImageVersion, imageVersion)
			set(f, "kernel", &m.Kernel, kernel)
			set(f, "initrd", &m.Initrd, initrd)
			set(f, "kernel-args", &m.KernelArgs, kargs)
			set(f, "vm", &m.VM, vm)
			set(f, "description", &m.Description, desc)
			return agentFields.applyGuest(f, m)
		},
	}
	imageE := entity[model.Image]{use: "image", path: "images", short: "Images (immutable versions: see `image publish`)",
		header: "NAME\tKIND\tPOOL\tVERSIONS\tCURRENT",
		row: func(im *model.Image) string {
			cur := ""
			if v := im.Version(""); v != nil {
				cur = v.Version
				if im.Current == "" {
					cur += " (newest)"
				}
			}
			return fmt.Sprintf("%s\t%s\t%s\t%d\t%s", im.Name, im.Kind, im.Pool, len(im.Versions), cur)
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&kind, "kind", "", "desktop, compute or course-vm")
			f.StringVar(&pool, "pool", "", "owning pool (course-vm images)")
			f.StringVar(&desc, "description", "", "description")
		},
		apply: func(f *pflag.FlagSet, _ *client.Client, im *model.Image) error {
			setKind(f, "kind", &im.Kind, kind)
			set(f, "pool", &im.Pool, pool)
			set(f, "description", &im.Description, desc)
			return nil
		},
	}
	bs := entity[model.BootServer]{use: "bootserver", path: "bootservers", short: "Boot servers (Remote Boot Service)",
		header: "NAME\tIP\tHTTP URL\tDHCP\tSUBNET",
		row: func(b *model.BootServer) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", b.Name, b.IP, b.HTTPURL, b.DHCP, b.Subnet)
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&ip, "ip", "", "server IPv4 address")
			f.StringVar(&httpURL, "url", "", "HTTP base URL of overtime serve as seen by clients")
			f.StringVar(&subnet, "subnet", "", "subnet served (CIDR)")
			f.StringVar(&dhcp, "dhcp", "", "full or proxy")
			f.StringVar(&rangeFrom, "range-from", "", "dynamic range start (full DHCP)")
			f.StringVar(&rangeTo, "range-to", "", "dynamic range end")
			f.StringVar(&router, "router", "", "default gateway handed out")
			f.StringArrayVar(&dnsServers, "dns-server", nil, "DNS server handed out (full DHCP), repeatable, at most 3, in order (replaces the list; --dns-server '' clears it)")
			f.StringVar(&domain, "domain", "", "DNS domain handed out (full DHCP), e.g. lab.example.org")
			f.StringVar(&iface, "interface", "", "interface dnsmasq listens on")
			f.StringVar(&nfsServer, "nfs-server", "", "NFS server for images (default: ip)")
			f.StringVar(&nfsRoot, "nfs-root", "", "NFS export holding images")
		},
		apply: func(f *pflag.FlagSet, _ *client.Client, b *model.BootServer) error {
			set(f, "ip", &b.IP, ip)
			set(f, "url", &b.HTTPURL, httpURL)
			set(f, "subnet", &b.Subnet, subnet)
			setKind(f, "dhcp", &b.DHCP, dhcp)
			set(f, "range-from", &b.RangeFrom, rangeFrom)
			set(f, "range-to", &b.RangeTo, rangeTo)
			set(f, "router", &b.Router, router)
			if f.Changed("dns-server") {
				b.DNSServers = slices.DeleteFunc(slices.Clone(dnsServers), func(d string) bool { return d == "" })
			}
			set(f, "domain", &b.Domain, domain)
			set(f, "interface", &b.Interface, iface)
			set(f, "nfs-server", &b.NFSServer, nfsServer)
			set(f, "nfs-root", &b.NFSRoot, nfsRoot)
			return nil
		},
	}
	exc := entity[model.Exception]{use: "exception", path: "exceptions", short: "Dated exceptions (exam, lecture, holiday)", hasTimes: true,
		header: "NAME\tKIND\tSTART\tEND\tMODE\tTARGETS\tOWNER",
		row: func(e *model.Exception) string {
			var t []string
			for _, x := range e.Targets {
				if x.Pool != "" {
					t = append(t, "pool:"+x.Pool)
				} else {
					t = append(t, "host:"+x.Host)
				}
			}
			owner := e.Owner // who booked it; site apply leaves bookings alone
			switch {
			case owner != "":
			case e.Kind == model.ExceptionPowerSave:
				owner = "(power saving)"
			default:
				owner = "(site file)"
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", e.Name, e.Kind, g.formatTime(e.Start), g.formatTime(e.End), e.Mode, strings.Join(t, ","), owner)
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&kind, "kind", "", "exam, lecture, holiday, maintenance or other")
			f.StringVar(&start, "start", "", "start (RFC 3339 or 'YYYY-MM-DD HH:MM' in the site's zone)")
			f.StringVar(&end, "end", "", "end (exclusive)")
			f.StringVar(&mode, "mode", "", "mode during the exception")
			f.StringVar(&desc, "description", "", "description")
			f.StringArrayVar(&pools, "pool", nil, "target pool, repeatable")
			f.StringArrayVar(&hosts, "host", nil, "target host, repeatable")
		},
		apply: func(f *pflag.FlagSet, c *client.Client, e *model.Exception) error {
			setKind(f, "kind", &e.Kind, kind)
			set(f, "mode", &e.Mode, mode)
			set(f, "description", &e.Description, desc)
			for _, p := range []struct {
				flag, v string
				t       *time.Time
			}{{"start", start, &e.Start}, {"end", end, &e.End}} {
				if f.Changed(p.flag) {
					t, err := parseTimeArg(c, p.v)
					if err != nil {
						return err
					}
					*p.t = t
				}
			}
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
	roleE := entity[model.RoleGrant]{use: "role", path: "roles", short: "Role grants (site-admin, pool-admin, lecturer, viewer, boot-server)",
		header: "NAME\tROLE\tPOOL\tBOOT SERVER\tMEMBERS",
		row: func(r *model.RoleGrant) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", r.Name, r.Role, r.Pool, r.BootServer, strings.Join(r.Members, ","))
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&role, "role", "", "site-admin, pool-admin, lecturer, viewer or boot-server")
			f.StringVar(&pool, "pool", "", "pool (pool-admin, lecturer)")
			f.StringVar(&bootServer, "boot-server", "", "boot server (boot-server role: the account its `overtime bootserver run` uses)")
			f.StringArrayVar(&members, "member", nil, "member uid, repeatable (replaces the list)")
		},
		apply: func(f *pflag.FlagSet, _ *client.Client, r *model.RoleGrant) error {
			setKind(f, "role", &r.Role, role)
			set(f, "pool", &r.Pool, pool)
			set(f, "boot-server", &r.BootServer, bootServer)
			if f.Changed("member") {
				r.Members = members
			}
			return nil
		},
	}
	hostCmd := host.commands(g)
	hostCmd.AddCommand(importCmd(g), newHostCredentialCmd(g),
		newHostPowerCmd(g, wire.OpReboot), newHostPowerCmd(g, wire.OpPowerOff), newHostPowerCmd(g, wire.OpWake), newHostPowerStatusCmd(g))
	for _, c := range hostCmd.Commands() {
		if c.Name() == "list" {
			c.Flags().StringVar(&listPool, "pool", "", "only hosts of this pool")
		}
	}
	imageCmd := imageE.commands(g)
	imageCmd.AddCommand(publishCmd(g), imageImportCmd(g), imageCurrentCmd(g), imageGCCmd(g))
	for _, c := range imageCmd.Commands() {
		if c.Name() == "show" {
			c.Short = "Show an image: versions, current, sizes, where each is verified, what keeps it from gc"
			c.RunE = imageShow(g)
		}
	}
	return []*cobra.Command{hostCmd, poolE.commands(g), modeE.commands(g), imageCmd, bs.commands(g), exc.commands(g), roleE.commands(g)}
}

func set(f *pflag.FlagSet, name string, dst *string, v string) {
	if f.Changed(name) {
		*dst = v
	}
}

func setKind[K ~string](f *pflag.FlagSet, name string, dst *K, v string) {
	if f.Changed(name) {
		*dst = K(v)
	}
}

func (e entity[T]) commands(g *globals) *cobra.Command {
	root := &cobra.Command{Use: e.use, Short: e.short}
	base := "/api/v1/" + e.path
	var dry bool
	list := &cobra.Command{Use: "list", Short: "List", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var q url.Values
			if e.listQuery != nil {
				q = e.listQuery()
			}
			var all []T
			if _, err := c.Get(base, q, &all); err != nil {
				return err
			}
			if e.hasTimes {
				g.useSiteZone(c)
			}
			return g.emit(all, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, e.header)
				for i := range all {
					fmt.Fprintln(w, e.row(&all[i]))
				}
			})
		}}
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
			var ch client.Changes
			if err := c.Send(http.MethodPut, path, dryQuery(dry), withName(&v, args[0]), &ch); err != nil {
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
	return root
}

// withName sets the entity's name field (all entities have "name" as their key).
func withName[T any](v *T, name string) any {
	switch x := any(v).(type) {
	case *model.Host:
		x.Name = name
	case *model.Pool:
		x.Name = name
	case *model.Mode:
		x.Name = name
	case *model.Image:
		x.Name = name
	case *model.BootServer:
		x.Name = name
	case *model.Exception:
		x.Name = name
	case *model.RoleGrant:
		x.Name = name
	}
	return v
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
