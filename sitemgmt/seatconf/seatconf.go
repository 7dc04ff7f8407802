// Package seatconf answers what a desktop's login stack gets: from the site's (or its
// pool's) model.DesktopLogin and the secrets the site manager keeps for that PC, the
// sssd.conf, krb5.conf, CA file and keytab the PC writes before its display manager
// starts (overtime-agent seat-config; docs/desktop.md "Logins"); from its
// model.Printing the CUPS client files, from its model.Homes pam_mount.conf.xml.
//
// sssd.conf (ding-libs' INI) and krb5.conf (profile) have no quoting: a value runs to the
// end of its line and ',' separates list items. Every value written here is either a
// constant or a field model.DesktopLogin.Validate has checked to be one inert item; the
// renderer checks again (a bind password from a file has no other check), so a value
// that could add an option of its own is refused, never written.
package seatconf

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Domain is the name of the sssd domain the desktops use. Fixed: it is not shown to
// users (names are not fully qualified), and the site's name may be free text.
const Domain = "university"

// Secrets are what a PC's login stack needs and no image or site document may hold.
type Secrets struct {
	BindPassword string // the password of DesktopLogin.BindDN; "" when none
	Keytab       []byte // this PC's keytab (krb5: optional; ad: required)
}

// SecretDir is the directory of the site manager's desktop secrets (overtime serve
// --desktop-secrets): bind-password (one line) and keytabs/HOST.keytab, one per PC.
// Read at each request, so that a rotated password or a newly joined PC takes effect
// at the PCs' next boot without a restart. "" = none.
type SecretDir string

// BindPasswordFile and KeytabFile name the files of a SecretDir.
const BindPasswordFile = "bind-password"

// KeytabFile is the path of host's keytab below a SecretDir.
func KeytabFile(host string) string { return filepath.Join("keytabs", host+".keytab") }

// For reads the secrets host may get: the bind password when d needs one, the host's
// keytab when it has one. A missing file is no error here (Render decides whether the
// configuration can work without it); an unreadable one is.
func (dir SecretDir) For(host string, d *model.DesktopLogin) (Secrets, error) {
	var sec Secrets
	if dir == "" {
		return sec, nil
	}
	if err := names.Hostname(host); err != nil { // a path component below
		return sec, err
	}
	if d.BindDN != "" {
		b, err := os.ReadFile(filepath.Join(string(dir), BindPasswordFile))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return sec, fmt.Errorf("desktop secrets: %w", err)
		}
		sec.BindPassword = strings.TrimRight(string(b), "\r\n")
	}
	if d.Provider != model.LoginLDAP {
		b, err := os.ReadFile(filepath.Join(string(dir), KeytabFile(host)))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return sec, fmt.Errorf("desktop secrets: %w", err)
		}
		sec.Keytab = b
	}
	return sec, nil
}

// Seat is what the site says about a PC's seat: its pool's (or the site's) login,
// printing and homes configuration; nil fields: none.
type Seat struct {
	Login    *model.DesktopLogin
	Printing *model.Printing
	Homes    *model.Homes
	// CourseVM: the host's mode now is a course-vm mode whose VM can run there; the
	// greeter offers it as a session (session.go). Filled by the caller, which asked the
	// resolver.
	CourseVM *CourseVM
	// Exam: an exam holds the host now (the resolver's Exam); the seat is locked
	// (exam.go). Filled by the caller.
	Exam bool
}

// SeatFor is the seat of host, a host of pool, in site.
func SeatFor(site *model.Site, pool string) Seat {
	return Seat{Login: site.DesktopLoginFor(pool), Printing: site.PrintingFor(pool), Homes: site.HomesFor(pool)}
}

// Render is what host (of pool) gets for its seat. When university logins cannot work
// there (nothing configured, a secret missing), Unavailable says why, in words for the
// PC's login screen, and no login file is given; printing, homes and sessions are
// rendered either way (local accounts print and get homes too). An
// error means a value would not render inertly (a bind password with a line break) or
// the configuration does not validate.
func Render(s Seat, host, pool string, sec Secrets) (*wire.SeatConfig, error) {
	out := &wire.SeatConfig{}
	if s.Printing != nil {
		if err := s.Printing.Validate("printing"); err != nil {
			return nil, err
		}
		out.Files = append(out.Files, printingFiles(s.Printing, host, pool)...)
	}
	if s.Homes != nil {
		if err := s.Homes.Validate("homes"); err != nil {
			return nil, err
		}
		// An exam's network reaches the exam's servers, not the file server: a home
		// mounted from it would hang the login (and a home mounted before the exam's
		// firewall, every program that touches it). Students sit an exam in a
		// temporary home (docs/desktop.md "Exams").
		if !s.Exam {
			out.Files = append(out.Files, wire.SeatFile{Path: wire.SeatPamMount, Mode: 0o644, Content: pamMountConf(s.Homes, host, pool)})
		}
	}
	if s.CourseVM != nil {
		out.Files = append(out.Files, sessionFiles(s.CourseVM, host, pool)...)
	}
	if s.Exam {
		out.Files = append(out.Files, examFiles(host, pool)...)
	}
	d := s.Login
	switch {
	case d == nil:
		out.Unavailable = "No university directory is configured for this PC (pool " + pool +
			"): only local accounts can log in. Administrators: set the site's desktopLogin (docs/desktop.md)."
		return out, nil
	case d.BindDN != "" && sec.BindPassword == "":
		out.Unavailable = "The site manager has no password for the directory account " + d.BindDN +
			" that PCs search with: university logins cannot work. Administrators: put it in the desktop secrets' " + BindPasswordFile + " file."
		return out, nil
	case d.Provider == model.LoginAD && len(sec.Keytab) == 0:
		out.Unavailable = "This PC (" + host + ") has no keytab of the " + d.Realm +
			" domain on the site manager: university logins cannot work. Administrators: join it and put its keytab in the desktop secrets as " + KeytabFile(host) + "."
		return out, nil
	}
	if err := d.Validate("desktopLogin"); err != nil {
		return nil, err
	}
	if err := inert("bind password", sec.BindPassword); err != nil {
		return nil, err
	}
	out.Directory = servers(d)
	out.Files = append(out.Files, wire.SeatFile{Path: wire.SeatSSSDConf, Mode: 0o600, Content: sssdConf(d, host, pool, sec, s.Homes != nil)})
	if d.CACert != "" {
		out.Files = append(out.Files, wire.SeatFile{Path: wire.SeatCACert, Mode: 0o644, Content: []byte(d.CACert)})
	}
	if len(sec.Keytab) > 0 {
		out.Files = append(out.Files, wire.SeatFile{Path: wire.SeatKeytab, Mode: 0o600, Content: sec.Keytab})
	}
	if d.Provider != model.LoginLDAP {
		out.Files = append(out.Files, wire.SeatFile{Path: wire.SeatKrb5Conf, Mode: 0o644, Content: krb5Conf(d, host, pool)})
	}
	out.Secret = len(sec.Keytab) > 0 || (d.BindDN != "" && sec.BindPassword != "")
	return out, nil
}

// printingFiles point the PC's CUPS clients at the print server: client.conf names the
// server (no cupsd runs on the PC), lpoptions the default queue. IPP goes encrypted
// where the server offers TLS.
func printingFiles(p *model.Printing, host, pool string) []wire.SeatFile {
	var b bytes.Buffer
	header(&b, "#", host, pool, "printing")
	fmt.Fprintf(&b, "ServerName %s\n", p.Server)
	b.WriteString("Encryption IfRequested\n")
	files := []wire.SeatFile{{Path: wire.SeatCUPSClient, Mode: 0o644, Content: b.Bytes()}}
	if p.DefaultPrinter != "" {
		var o bytes.Buffer
		header(&o, "#", host, pool, "printing")
		fmt.Fprintf(&o, "Default %s\n", p.DefaultPrinter)
		files = append(files, wire.SeatFile{Path: wire.SeatLPOptions, Mode: 0o644, Content: o.Bytes()})
	}
	return files
}

// inert refuses a value that could end its line or start a comment in sssd.conf.
func inert(what, v string) error {
	if v != strings.TrimSpace(v) {
		return fmt.Errorf("%s: leading or trailing white space would be lost in sssd.conf", what)
	}
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s: a control character (line break) cannot be written to sssd.conf", what)
		}
	}
	return nil
}

func header(b *bytes.Buffer, comment, host, pool, field string) {
	fmt.Fprintf(b, "%s Written at boot by overtime-agent seat-config, from the site manager's %s\n", comment, field)
	fmt.Fprintf(b, "%s for host %s (pool %s). Rewritten at every boot: change the site instead.\n", comment, host, pool)
}

func sssdConf(d *model.DesktopLogin, host, pool string, sec Secrets, homes bool) []byte {
	var b bytes.Buffer
	header(&b, "#", host, pool, "desktopLogin")
	opt := func(k, v string) { fmt.Fprintf(&b, "%s = %s\n", k, v) }
	b.WriteString("\n[sssd]\n")
	opt("config_file_version", "2")
	opt("services", "nss, pam")
	opt("domains", Domain)
	// Local system accounts never come from the university's directory.
	b.WriteString("\n[nss]\n")
	opt("filter_users", "root")
	opt("filter_groups", "root")
	b.WriteString("\n[pam]\n")
	fmt.Fprintf(&b, "\n[domain/%s]\n", Domain)
	switch d.Provider {
	case model.LoginLDAP:
		opt("id_provider", "ldap")
		opt("auth_provider", "ldap")
	case model.LoginKerberos:
		opt("id_provider", "ldap")
		opt("auth_provider", "krb5")
	case model.LoginAD:
		opt("id_provider", "ad")
		opt("auth_provider", "ad")
	}
	// Passwords are changed at the university's own service, not at a pool PC; who may
	// log in at a pool is the pool's business, not the domain's access rules.
	opt("chpass_provider", "none")
	opt("access_provider", "permit")
	if len(d.URIs) > 0 {
		if d.Provider == model.LoginAD {
			hosts := make([]string, len(d.URIs))
			for i, u := range d.URIs {
				p, _ := url.Parse(u) // validated
				hosts[i] = p.Hostname()
			}
			opt("ad_server", strings.Join(hosts, ", "))
		} else {
			opt("ldap_uri", strings.Join(d.URIs, ", "))
			if strings.HasPrefix(d.URIs[0], "ldap://") {
				opt("ldap_id_use_start_tls", "true")
			}
		}
	}
	if d.SearchBase != "" {
		opt("ldap_search_base", d.SearchBase)
	}
	if d.Provider != model.LoginAD {
		opt("ldap_schema", "rfc2307")
	}
	opt("ldap_tls_reqcert", "demand")
	if d.CACert != "" {
		opt("ldap_tls_cacert", wire.SeatCACert)
	}
	if d.BindDN != "" {
		opt("ldap_default_bind_dn", d.BindDN)
		opt("ldap_default_authtok_type", "password")
		opt("ldap_default_authtok", sec.BindPassword)
	}
	switch d.Provider {
	case model.LoginKerberos:
		opt("krb5_realm", d.Realm)
		opt("krb5_server", strings.Join(d.KDCs, ", "))
		// With this PC's keytab, a ticket is checked against the PC's own key: a KDC
		// someone impersonates on the pool network cannot let a password through.
		if len(sec.Keytab) > 0 {
			opt("krb5_validate", "true")
			opt("krb5_keytab", wire.SeatKeytab)
		} else {
			opt("krb5_validate", "false")
		}
	case model.LoginAD:
		opt("ad_domain", d.ADDomain())
		opt("krb5_realm", d.Realm)
		opt("krb5_keytab", wire.SeatKeytab)
		opt("ad_gpo_access_control", "disabled")
	}
	// A stateless PC keeps its cache in RAM anyway; offline logins with cached
	// passwords would outlive a password change for the PC's uptime.
	opt("cache_credentials", "false")
	opt("enumerate", "false")
	// With homes from the file server, ~ is where pam_mount mounts it, whatever the
	// directory says (AD's default would be /home/DOMAIN/user).
	if homes {
		opt("override_homedir", HomeDir)
	}
	// Give up on an unreachable directory within seconds, so the login screen can say
	// so instead of hanging.
	opt("ldap_network_timeout", "3")
	opt("ldap_opt_timeout", "5")
	return b.Bytes()
}

func krb5Conf(d *model.DesktopLogin, host, pool string) []byte {
	var b bytes.Buffer
	header(&b, "#", host, pool, "desktopLogin")
	b.WriteString("\n[libdefaults]\n")
	fmt.Fprintf(&b, "\tdefault_realm = %s\n", d.Realm)
	b.WriteString("\tdns_lookup_realm = false\n")
	fmt.Fprintf(&b, "\tdns_lookup_kdc = %t\n", len(d.KDCs) == 0)
	b.WriteString("\trdns = false\n")
	if len(d.KDCs) > 0 {
		b.WriteString("\n[realms]\n")
		fmt.Fprintf(&b, "\t%s = {\n", d.Realm)
		for _, k := range d.KDCs {
			fmt.Fprintf(&b, "\t\tkdc = %s\n", k)
		}
		b.WriteString("\t}\n")
	}
	if d.Provider == model.LoginAD {
		b.WriteString("\n[domain_realm]\n")
		fmt.Fprintf(&b, "\t.%s = %s\n", d.ADDomain(), d.Realm)
		fmt.Fprintf(&b, "\t%s = %s\n", d.ADDomain(), d.Realm)
	}
	return b.Bytes()
}

// servers are the directory's LDAP servers as host:port (ldap 389, ldaps 636).
func servers(d *model.DesktopLogin) []string {
	var out []string
	for _, u := range d.URIs {
		p, err := url.Parse(u)
		if err != nil { // validated
			continue
		}
		port := p.Port()
		if port == "" {
			port = map[string]string{"ldap": "389", "ldaps": "636"}[p.Scheme]
		}
		out = append(out, net.JoinHostPort(p.Hostname(), port))
	}
	return out
}

// HomeDir is every directory user's home on a PC with homes from the file server, in
// sssd's notation; pam_mount's mount point is the same directory.
const HomeDir = "/home/%u"

// homeMountpoint is HomeDir in pam_mount's notation.
const homeMountpoint = "/home/" + model.HomesUser

// homesUIDs are the users pam_mount mounts a home for: every account of a directory
// (sssd's IDs start at 1000, AD's ID mapping stays below 2^31), never root or a system
// account of the image.
const homesUIDs = "1000-2147483647"

// pamMountConf is pam_mount.conf.xml with the one volume of the user's home. pam_mount
// creates the mount point, owned by the user, when it is missing and removes it at
// logout; at the last logout of the user it signals processes still using the home
// (TERM, then KILL half a second later) so that the unmount does not fail. The values
// written into attributes are model.Homes.Validate's XML-inert alphabet; host and pool
// only appear in a comment, where "--" is not allowed.
//
// nosuid and nodev are always set: a set-uid file on the file server must not run as
// root here. NFS mounts are tried once (retry=0) so that a server that is down costs a
// login seconds, not minutes. For cifs, pam_mount adds username= and uid= itself and hands mount.cifs the
// password the user logged in with (pam_mount's auth hook keeps it); with sec=krb5*
// cruid= lets cifs.upcall use the user's own Kerberos ticket instead.
func pamMountConf(h *model.Homes, host, pool string) []byte {
	opts := []string{"nosuid", "nodev"}
	if h.Type == model.HomesCIFS {
		// SMB without POSIX extensions has no Unix modes: the kernel shows every file with
		// file_mode and dir_mode (default 0755), so another account on the PC could read
		// the home. The user's alone, as the server keeps it; the site's options win.
		opts = append(opts, "file_mode=0600", "dir_mode=0700")
	}
	if h.Type == model.HomesNFS {
		// One attempt: mount.nfs retries a foreground mount for two minutes by default,
		// and the user would wait that long at the greeter for a server that is down
		// before getting the temporary home. The site's options come after and win.
		opts = append(opts, "retry=0")
	}
	if h.Options != "" {
		opts = append(opts, h.Options)
	}
	if h.Type == model.HomesCIFS && strings.Contains(","+h.Options, ",sec=krb5") {
		opts = append(opts, "cruid=%(USERUID)")
	}
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="utf-8" ?>` + "\n")
	b.WriteString(`<!DOCTYPE pam_mount SYSTEM "pam_mount.conf.xml.dtd">` + "\n")
	var c bytes.Buffer
	header(&c, "", strings.ReplaceAll(host, "--", "- -"), strings.ReplaceAll(pool, "--", "- -"), "homes")
	b.WriteString("<!--\n" + c.String() + "-->\n")
	b.WriteString("<pam_mount>\n")
	b.WriteString(`<debug enable="0" />` + "\n")
	fmt.Fprintf(&b, `<volume uid="%s" fstype="%s" server="%s" path="%s" mountpoint="%s" options="%s" />`+"\n",
		homesUIDs, h.Type, h.Server, h.Path, homeMountpoint, strings.Join(opts, ","))
	b.WriteString(`<mkmountpoint enable="1" remove="true" />` + "\n")
	b.WriteString(`<logout wait="500000" hup="no" term="yes" kill="yes" />` + "\n")
	// Lazy: at the user's last logout their systemd user manager (and what logind has
	// not yet stopped of the session) still holds the home, and a plain umount fails
	// "device is busy", leaving the home mounted for the next person at the PC (seen in
	// test/desktop_test.go). Detached, it is gone from the PC at once and the server
	// connection closes when the last of those processes has.
	b.WriteString(`<umount>umount -l %(MNTPT)</umount>` + "\n")
	b.WriteString("</pam_mount>\n")
	return b.Bytes()
}
