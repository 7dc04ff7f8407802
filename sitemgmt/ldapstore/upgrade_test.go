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

// Directories set up before a schema change hold the older schema. These tests make each
// older schema from the current one and check the upgrade story of
// sitemgmt/ldap/README.md, "Schema changes".

// schemaUpgrades are the additive schema changes, oldest first: the section of
// overtime.schema each appended, what it added to object classes' MAY lists (new text,
// old text), its upgrade file under sitemgmt/ldap/upgrades, and an attribute name that
// must be gone from the schema before it.
var schemaUpgrades = []struct {
	section string
	may     [][2]string
	ldif    string
	attr    string
}{
	{"# --- name service handed out by a boot server", [][2]string{{" $\n\t\totDNSServer $ otDNSDomain ) )", " ) )"}}, "dns.ldif", "otDNS"},
	{"# --- desktops at the seat", [][2]string{
		{"MAY ( otUnknownMode $ otDesktopLogin $ otPrinting ) )", "MAY otUnknownMode )"},
		{" $\n\t\totDesktopLogin $ otPrinting ) )", " ) )"},
	}, "desktop-seat.ldif", "otDesktopLogin"},
	{"# --- homes of the desktops", [][2]string{
		{"MAY ( otUnknownMode $ otDesktopLogin $ otPrinting $ otHomes ) )", "MAY ( otUnknownMode $ otDesktopLogin $ otPrinting ) )"},
		{" $\n\t\totDesktopLogin $ otPrinting $ otHomes ) )", " $\n\t\totDesktopLogin $ otPrinting ) )"},
	}, "desktop-homes.ldif", "otHomes"},
	{"# --- what an exam may reach", [][2]string{{" $ otOwner $ otExamAllow ) )", " $ otOwner ) )"}}, "exam-allow.ldif", "otExamAllow"},
	{"# --- the API over HTTPS", [][2]string{{" $\n\t\totDNSServer $ otDNSDomain $ otAPIURL ) )", " $\n\t\totDNSServer $ otDNSDomain ) )"}}, "api-url.ldif", "otAPIURL"},
}

// schemaBefore is a directory holding overtime.schema as it was before schemaUpgrades[i]
// (that change and every later one taken out).
func schemaBefore(t *testing.T, i int) string {
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
	for j := len(schemaUpgrades) - 1; j >= i; j-- {
		u := schemaUpgrades[j]
		start := strings.Index(s, u.section)
		end := -1
		if start >= 0 {
			end = strings.Index(s[start+1:], "# --- ")
		}
		if start < 0 || end < 0 {
			t.Fatalf("overtime.schema changed: teach schemaUpgrades the new layout (section %q)", u.section)
		}
		s = s[:start] + s[start+1+end:]
		for _, m := range u.may {
			if strings.Count(s, m[0]) != 1 {
				t.Fatalf("overtime.schema changed: teach schemaUpgrades the new layout (%q)", m[0])
			}
			s = strings.Replace(s, m[0], m[1], 1)
		}
		if strings.Contains(s, u.attr) {
			t.Fatalf("schemaBefore(%d) left %s", j, u.attr)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "overtime.schema"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// preDNSSchema is overtime.schema without otDNSServer and otDNSDomain (and what came
// after them).
func preDNSSchema(t *testing.T) string { return schemaBefore(t, 0) }

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
	site.Exceptions[0].Allow = nil  // a later schema's field
	site.BootServers[0].APIURL = "" // and another
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

// The cn=config upgrades: a slapd whose cn=config was loaded with the oldest
// overtime.ldif, upgraded with each file of sitemgmt/ldap/upgrades in turn by the
// commands its header gives, holds after each the same schema entry as one loaded with
// the overtime.ldif of that step (the last: the current one).
func TestSchemaUpgrades(t *testing.T) {
	needs.Servers(t, "slapd, slapadd, slapcat (Debian package slapd)", "ldapmodify, ldapsearch (ldap-utils)")
	schemaDir, err := slapdenv.FindSchemaDir()
	if err != nil {
		t.Fatal(err)
	}
	gen, err := os.ReadFile(filepath.Join(schemaDir, "gen-ldif.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// ldifBefore is overtime.ldif before schemaUpgrades[i], written by gen-ldif.sh.
	ldifBefore := func(i int) string {
		if i == len(schemaUpgrades) {
			return filepath.Join(schemaDir, "overtime.ldif")
		}
		old := schemaBefore(t, i)
		if err := os.WriteFile(filepath.Join(old, "gen-ldif.sh"), gen, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("sh", filepath.Join(old, "gen-ldif.sh")).CombinedOutput(); err != nil {
			t.Fatalf("gen-ldif.sh: %v\n%s", err, out)
		}
		return filepath.Join(old, "overtime.ldif")
	}
	dir := configDir(t, ldifBefore(0))
	for i, u := range schemaUpgrades {
		want := schemaEntry(t, configDir(t, ldifBefore(i+1)))
		if before := schemaEntry(t, dir); slices.Equal(before, want) {
			t.Fatalf("%s: the schema before equals the one after: nothing to test", u.ldif)
		}
		applyUpgrade(t, dir, filepath.Join(schemaDir, "upgrades", u.ldif))
		if got := schemaEntry(t, dir); !slices.Equal(got, want) {
			t.Errorf("schema entry after %s:\n%s\nwant (fresh load):\n%s", u.ldif, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// applyUpgrade runs slapd on the cn=config directory dir and applies the upgrade file
// with the two commands of its header, then stops slapd.
func applyUpgrade(t *testing.T, dir, upgrade string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ldapi")
	uri := "ldapi://" + strings.ReplaceAll(sock, "/", "%2F")
	ctx, cancel := context.WithCancel(context.Background())
	slapd := exec.CommandContext(ctx, slapdenv.SlapdPath, "-d", "0", "-F", dir, "-h", uri)
	var log bytes.Buffer
	slapd.Stdout, slapd.Stderr = &log, &log
	if err := slapd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = slapd.Wait()
	}()
	answers := poll.WaitEvery(10*time.Second, 50*time.Millisecond, func() bool {
		return exec.Command("ldapsearch", "-Y", "EXTERNAL", "-H", uri, "-LLL", "-b", "cn=config", "-s", "base", "dn").Run() == nil
	})
	if !answers {
		t.Fatalf("slapd -F did not answer on %s:\n%s", uri, log.String())
	}
	header := `dn=$(ldapsearch -Y EXTERNAL -H "$URI" -LLL -b cn=schema,cn=config '(cn=*overtime)' dn | sed -n 's/^dn: //p')
sed "s/^dn: .*/dn: $dn/" "$UPGRADE" | ldapmodify -Y EXTERNAL -H "$URI"`
	cmd := exec.Command("sh", "-ec", header)
	cmd.Env = append(os.Environ(), "URI="+uri, "UPGRADE="+upgrade)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("upgrade %s: %v\n%s\nslapd:\n%s", filepath.Base(upgrade), err, out, log.String())
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
