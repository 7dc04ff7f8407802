package ldapstore

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/internal/testenv/needs"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/slapdtest"
)

// Directories set up before the DNS fields of boot servers (issue 18) hold the older
// schema. These tests make that schema from the current one and check the upgrade story
// of sitemgmt/ldap/README.md, "Schema changes".

// preDNSSchema is overtime.schema without otDNSServer and otDNSDomain.
func preDNSSchema(t *testing.T) string {
	t.Helper()
	schemaDir, err := slapdenv.FindSchemaDir()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(schemaDir, "overtime.schema"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "# --- name service handed out by a boot server")
	end := strings.Index(s, "# --- object classes")
	may := " $\n\t\totDNSServer $ otDNSDomain ) )"
	if start < 0 || end < start || strings.Count(s, may) != 1 {
		t.Fatal("overtime.schema changed: teach preDNSSchema the new layout")
	}
	s = strings.Replace(s[:start]+s[end:], may, " ) )", 1)
	if strings.Contains(s, "otDNS") {
		t.Fatal("preDNSSchema left a DNS attribute")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "overtime.schema"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A directory with the older schema keeps working: the site loads and applies as long
// as no boot server uses the new fields, and a write that does is refused naming the
// schema, before the boot server changes.
func TestOlderSchemaWithoutDNS(t *testing.T) {
	srv := slapdtest.StartTWith(t, slapdenv.Options{SchemaDir: preDNSSchema(t)})
	st, err := Open(Config{URL: srv.URL, BaseDN: srv.BaseDN, BindDN: srv.ServiceDN, BindPassword: srv.ServicePW})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Init(bg, InitOptions{SiteName: "uni", Timezone: "Europe/Berlin", AdminUID: "admin", AdminPassword: adminPW}); err != nil {
		t.Fatal(err)
	}
	site := exampleSite()
	site.BootServers[0].DNSServers, site.BootServers[0].Domain = nil, ""
	mustApply(t, st, mustLoad(t, st), site)
	cur := mustLoad(t, st)
	assertSameSite(t, cur, site)

	next := cur.Clone()
	next.BootServers[0].DNSServers = []string{"10.0.0.53"}
	_, err = st.Apply(bg, cur, next)
	if err == nil || !strings.Contains(err.Error(), `Overtime schema is older than this site manager`) || !strings.Contains(err.Error(), "Schema changes") {
		t.Fatalf("Apply on the older schema: %v", err)
	}
	assertSameSite(t, mustLoad(t, st), site)
}

// The cn=config upgrade: a slapd whose cn=config was loaded with the older overtime.ldif,
// upgraded with sitemgmt/ldap/upgrades/dns.ldif by the commands its header gives, holds
// the same schema entry as one loaded with the current overtime.ldif.
func TestSchemaUpgradeDNS(t *testing.T) {
	needs.Servers(t, "slapd, slapadd, slapcat (Debian package slapd)", "ldapmodify, ldapsearch (ldap-utils)")
	schemaDir, err := slapdenv.FindSchemaDir()
	if err != nil {
		t.Fatal(err)
	}
	// The older overtime.ldif, written by gen-ldif.sh from the older schema.
	old := preDNSSchema(t)
	gen, err := os.ReadFile(filepath.Join(schemaDir, "gen-ldif.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "gen-ldif.sh"), gen, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("sh", filepath.Join(old, "gen-ldif.sh")).CombinedOutput(); err != nil {
		t.Fatalf("gen-ldif.sh: %v\n%s", err, out)
	}

	fresh := schemaEntry(t, configDir(t, filepath.Join(schemaDir, "overtime.ldif")))

	dir := configDir(t, filepath.Join(old, "overtime.ldif"))
	if before := schemaEntry(t, dir); slices.Equal(before, fresh) {
		t.Fatal("the older schema equals the current one: nothing to test")
	}
	sock := filepath.Join(t.TempDir(), "ldapi")
	uri := "ldapi://" + strings.ReplaceAll(sock, "/", "%2F")
	ctx, cancel := context.WithCancel(context.Background())
	slapd := exec.CommandContext(ctx, slapdenv.SlapdPath, "-d", "0", "-F", dir, "-h", uri)
	var log bytes.Buffer
	slapd.Stdout, slapd.Stderr = &log, &log
	if err := slapd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			_ = slapd.Wait()
		}
	}
	defer stop()
	answers := poll.WaitEvery(10*time.Second, 50*time.Millisecond, func() bool {
		return exec.Command("ldapsearch", "-Y", "EXTERNAL", "-H", uri, "-LLL", "-b", "cn=config", "-s", "base", "dn").Run() == nil
	})
	if !answers {
		t.Fatalf("slapd -F did not answer on %s:\n%s", uri, log.String())
	}
	// The two commands of the upgrade file's header, with this server's URI.
	header := `dn=$(ldapsearch -Y EXTERNAL -H "$URI" -LLL -b cn=schema,cn=config '(cn=*overtime)' dn | sed -n 's/^dn: //p')
sed "s/^dn: .*/dn: $dn/" "$UPGRADE" | ldapmodify -Y EXTERNAL -H "$URI"`
	cmd := exec.Command("sh", "-ec", header)
	cmd.Env = append(os.Environ(), "URI="+uri, "UPGRADE="+filepath.Join(schemaDir, "upgrades", "dns.ldif"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("upgrade: %v\n%s\nslapd:\n%s", err, out, log.String())
	}
	stop()
	if got := schemaEntry(t, dir); !slices.Equal(got, fresh) {
		t.Errorf("upgraded schema entry:\n%s\nwant (fresh load):\n%s", strings.Join(got, "\n"), strings.Join(fresh, "\n"))
	}
}

// configDir makes a cn=config directory (slapd -F) with the standard schemas and the
// Overtime schema in the cn=config LDIF form at ldif, the way Debian's slapd is set up.
func configDir(t *testing.T, ldif string) string {
	t.Helper()
	dir := t.TempDir()
	init := filepath.Join(dir, "init.ldif")
	var b strings.Builder
	b.WriteString("dn: cn=config\nobjectClass: olcGlobal\ncn: config\n\n")
	b.WriteString("dn: cn=schema,cn=config\nobjectClass: olcSchemaConfig\ncn: schema\n\n")
	for _, f := range []string{"core", "cosine", "nis", "inetorgperson"} {
		b.WriteString("include: file://" + filepath.Join(slapdenv.SystemSchemaDir, f+".ldif") + "\n\n")
	}
	b.WriteString("include: file://" + ldif + "\n\n")
	b.WriteString("dn: olcDatabase={0}config,cn=config\nobjectClass: olcDatabaseConfig\nolcDatabase: {0}config\n")
	b.WriteString("olcAccess: {0}to * by dn.exact=gidNumber=" + strconv.Itoa(os.Getgid()) + "+uidNumber=" + strconv.Itoa(os.Getuid()) +
		",cn=peercred,cn=external,cn=auth manage by * break\n")
	if err := os.WriteFile(init, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "slapd.d")
	if err := os.Mkdir(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(slapdenv.SlapaddPath, "-n0", "-F", cfg, "-l", init).CombinedOutput(); err != nil {
		t.Fatalf("slapadd: %v\n%s", err, out)
	}
	return cfg
}

var schemaValueRE = regexp.MustCompile(`^(olcObjectIdentifier|olcAttributeTypes|olcObjectClasses): `)

// schemaEntry is the Overtime schema entry of a cn=config directory, as slapcat reads it:
// its schema values, unfolded.
func schemaEntry(t *testing.T, dir string) []string {
	t.Helper()
	out, err := exec.Command("/usr/sbin/slapcat", "-n0", "-F", dir, "-o", "ldif-wrap=no", "-a", "(cn=*overtime)").CombinedOutput()
	if err != nil {
		t.Fatalf("slapcat: %v\n%s", err, out)
	}
	var vals []string
	for _, l := range strings.Split(string(out), "\n") {
		if schemaValueRE.MatchString(l) {
			vals = append(vals, l)
		}
	}
	if len(vals) == 0 {
		t.Fatalf("no Overtime schema entry in %s:\n%s", dir, out)
	}
	return vals
}
