package seatconf

import (
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Regenerate the golden files with: go test ./sitemgmt/seatconf -update
var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current renderer")

// testCA is a CA certificate (ECDSA P-256, self-signed, "Uni Test CA") for the cases.
const testCA = `-----BEGIN CERTIFICATE-----
MIIBgjCCASegAwIBAgIUbITyiUN1A5zjd9Qs8wRtsq+T8B0wCgYIKoZIzj0EAwIw
FjEUMBIGA1UEAwwLVW5pIFRlc3QgQ0EwHhcNMjYxMTI4MDY1MTIxWhcNMzYxMTI1
MDY1MTIxWjAWMRQwEgYDVQQDDAtVbmkgVGVzdCBDQTBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABNjRwJRzbw9HBhfwkWB6NXYbTOCwbpuhByQjF1dvUDDLJafRYVXq
4MB81TjHjvpRUfjz2L0uWHE6FwCWp6XxvBOjUzBRMB0GA1UdDgQWBBRUh9BSUAod
jKjfxnKpF57OuNCiUTAfBgNVHSMEGDAWgBRUh9BSUAodjKjfxnKpF57OuNCiUTAP
BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0kAMEYCIQDtGM9iQvhbiIFkmoBH
bUXfnD8ZKemJVaIatSvMvLXU8gIhAIcEvgbkvwX61V26lUxa4ckS//0X5zk4dLuE
6Flaxb80
-----END CERTIFICATE-----
`

func cases() []struct {
	name string
	d    *model.DesktopLogin
	sec  Secrets
	pr   *model.Printing
	hm   *model.Homes
} {
	return []struct {
		name string
		d    *model.DesktopLogin
		sec  Secrets
		pr   *model.Printing
		hm   *model.Homes
	}{
		{"ldap-starttls", &model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldap://ldap1.uni.example", "ldap://ldap2.uni.example:3389"},
			SearchBase: "dc=uni,dc=example", CACert: testCA, BindDN: "cn=pc-reader,ou=services,dc=uni,dc=example"},
			Secrets{BindPassword: "s3cret # not a comment; = really"}, nil, nil},
		{"ldaps-anonymous", &model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldaps://ldap.uni.example"}, SearchBase: "ou=people,dc=uni,dc=example"}, Secrets{}, nil, nil},
		{"krb5-keytab", &model.DesktopLogin{Provider: model.LoginKerberos, URIs: []string{"ldaps://ldap.uni.example"}, SearchBase: "dc=uni,dc=example",
			CACert: testCA, Realm: "UNI.EXAMPLE", KDCs: []string{"kdc1.uni.example", "10.0.0.8:88"}}, Secrets{Keytab: []byte("\x05\x02keytab")}, nil, nil},
		{"krb5-no-keytab", &model.DesktopLogin{Provider: model.LoginKerberos, URIs: []string{"ldaps://ldap.uni.example"}, SearchBase: "dc=uni,dc=example",
			Realm: "UNI.EXAMPLE", KDCs: []string{"kdc1.uni.example"}}, Secrets{}, nil, nil},
		{"ad", &model.DesktopLogin{Provider: model.LoginAD, URIs: []string{"ldap://dc1.ad.uni.example", "ldap://dc2.ad.uni.example"}, Realm: "AD.UNI.EXAMPLE", CACert: testCA},
			Secrets{Keytab: []byte("\x05\x02keytab")}, nil, nil},
		{"ldaps-printing", &model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldaps://ldap.uni.example"}, SearchBase: "dc=uni,dc=example"},
			Secrets{}, &model.Printing{Server: "print.uni.example:631", DefaultPrinter: "room-101"}, nil},
		{"printing-only", nil, Secrets{}, &model.Printing{Server: "print.uni.example"}, nil},
		{"homes-nfs", &model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldaps://ldap.uni.example"}, SearchBase: "dc=uni,dc=example"},
			Secrets{}, nil, &model.Homes{Type: model.HomesNFS, Server: "files.uni.example", Path: "/export/homes/%(USER)", Options: "vers=4.2,sec=sys"}},
		{"homes-cifs", &model.DesktopLogin{Provider: model.LoginAD, URIs: []string{"ldap://dc1.ad.uni.example"}, Realm: "AD.UNI.EXAMPLE"},
			Secrets{Keytab: []byte("\x05\x02keytab")}, nil, &model.Homes{Type: model.HomesCIFS, Server: "dc1.ad.uni.example", Path: "users$/%(USER)", Options: "vers=3.0,sec=krb5i"}},
		{"homes-cifs-password", nil, Secrets{}, nil, &model.Homes{Type: model.HomesCIFS, Server: "files.uni.example", Path: "homes/%(USER)"}},
	}
}

// golden renders every file of every case into testdata/NAME.golden (the files one after
// another, each under a line naming its path and mode; binary content as its length).
func TestGolden(t *testing.T) {
	for _, tc := range cases() {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(Seat{Login: tc.d, Printing: tc.pr, Homes: tc.hm}, "pc-a01", "lab-a", tc.sec)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			b.WriteString("==> directory servers: " + strings.Join(out.Directory, " ") + "\n")
			if out.Unavailable != "" {
				b.WriteString("==> unavailable: " + out.Unavailable + "\n")
			}
			for _, f := range out.Files {
				b.WriteString("==> " + f.Path + " " + fmt.Sprintf("%04o", f.Mode) + "\n")
				if f.Path == wire.SeatKeytab {
					b.WriteString("(binary, " + strconv.Itoa(len(f.Content)) + " bytes)\n")
					continue
				}
				b.Write(f.Content)
			}
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./sitemgmt/seatconf -update writes it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("%s differs from the renderer's output:\n%s", path, b.String())
			}
			for _, f := range out.Files {
				if !isSeatFile(f.Path) {
					t.Errorf("file %s is not one of wire.SeatFiles", f.Path)
				}
				if (f.Path == wire.SeatSSSDConf || f.Path == wire.SeatKeytab) != (f.Mode == 0o600) {
					t.Errorf("%s mode %o", f.Path, f.Mode)
				}
			}
		})
	}
}

func isSeatFile(p string) bool {
	for _, f := range wire.SeatFiles {
		if f == p {
			return true
		}
	}
	return false
}

// What cannot work says so in words a person at the login screen understands; a value
// that would not stay inert in sssd.conf is refused.
func TestUnavailableAndRefused(t *testing.T) {
	ldapBind := &model.DesktopLogin{Provider: model.LoginLDAP, URIs: []string{"ldaps://l"}, SearchBase: "dc=x", BindDN: "cn=r,dc=x"}
	for _, tc := range []struct {
		name        string
		d           *model.DesktopLogin
		sec         Secrets
		unavailable string // substring of the reason, or "" for a plain error
		err         string
	}{
		{"none", nil, Secrets{}, "No university directory is configured for this PC (pool lab-a)", ""},
		{"no bind password", ldapBind, Secrets{}, "no password for the directory account cn=r,dc=x", ""},
		{"ad without keytab", &model.DesktopLogin{Provider: model.LoginAD, Realm: "AD.X"}, Secrets{}, "This PC (pc-a01) has no keytab of the AD.X domain", ""},
		{"password with newline", ldapBind, Secrets{BindPassword: "a\nldap_tls_reqcert = never"}, "", "bind password: a control character"},
		{"password with trailing space", ldapBind, Secrets{BindPassword: "a "}, "", "white space would be lost"},
		{"invalid configuration", &model.DesktopLogin{Provider: "nis"}, Secrets{}, "", "unknown provider"},
	} {
		out, err := Render(Seat{Login: tc.d}, "pc-a01", "lab-a", tc.sec)
		switch {
		case tc.unavailable != "":
			if err != nil || !strings.Contains(out.Unavailable, tc.unavailable) || len(out.Files) != 0 {
				t.Errorf("%s: %v %+v, want unavailable %q and no files", tc.name, err, out, tc.unavailable)
			}
		case err == nil || !strings.Contains(err.Error(), tc.err):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.err)
		}
	}
}

// SecretDir hands a host its own keytab and the shared bind password, and nothing for a
// name that is not a host name (no path out of the directory).
func TestSecretDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "keytabs"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{BindPasswordFile: "pw\n", KeytabFile("pc-a01"): "kt-a01", KeytabFile("pc-a02"): "kt-a02"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	krb := &model.DesktopLogin{Provider: model.LoginKerberos, BindDN: "cn=r,dc=x"}
	sec, err := SecretDir(dir).For("pc-a01", krb)
	if err != nil || sec.BindPassword != "pw" || string(sec.Keytab) != "kt-a01" {
		t.Errorf("pc-a01: %+v %v", sec, err)
	}
	if sec, err := SecretDir(dir).For("pc-a03", krb); err != nil || sec.Keytab != nil {
		t.Errorf("pc-a03 (no keytab): %+v %v", sec, err)
	}
	if sec, err := SecretDir(dir).For("pc-a01", &model.DesktopLogin{Provider: model.LoginLDAP}); err != nil || sec.Keytab != nil || sec.BindPassword != "" {
		t.Errorf("ldap without bind DN gets %+v %v, want nothing", sec, err)
	}
	if _, err := SecretDir(dir).For("../keytabs/pc-a02", krb); err == nil {
		t.Error("a path as host name: want refused")
	}
}

// pam_mount.conf.xml is well-formed XML whose one volume carries exactly the site's
// values (an XML parser reads back what was meant), mounted over the user's home for
// directory users only; a configuration that does not validate is refused, not written.
func TestPamMountConf(t *testing.T) {
	type volume struct {
		UID        string `xml:"uid,attr"`
		FSType     string `xml:"fstype,attr"`
		Server     string `xml:"server,attr"`
		Path       string `xml:"path,attr"`
		Mountpoint string `xml:"mountpoint,attr"`
		Options    string `xml:"options,attr"`
	}
	type conf struct {
		XMLName xml.Name `xml:"pam_mount"`
		Volumes []volume `xml:"volume"`
		Mkmnt   struct {
			Enable string `xml:"enable,attr"`
			Remove string `xml:"remove,attr"`
		} `xml:"mkmountpoint"`
		Logout struct {
			Term string `xml:"term,attr"`
			Kill string `xml:"kill,attr"`
		} `xml:"logout"`
	}
	for _, tc := range []struct {
		h    model.Homes
		opts string
	}{
		{model.Homes{Type: model.HomesNFS, Server: "10.0.0.7", Path: "/export/~x/$y+@z/%(USER)"}, "nosuid,nodev,retry=0"},
		{model.Homes{Type: model.HomesCIFS, Server: "files", Path: "users$/%(USER)", Options: "sec=ntlmssp"}, "nosuid,nodev,file_mode=0600,dir_mode=0700,sec=ntlmssp"},
		{model.Homes{Type: model.HomesCIFS, Server: "files", Path: "u/%(USER)", Options: "vers=3.1.1,sec=krb5"}, "nosuid,nodev,file_mode=0600,dir_mode=0700,vers=3.1.1,sec=krb5,cruid=%(USERUID)"},
	} {
		out, err := Render(Seat{Homes: &tc.h}, "pc--a01", "lab--a", Secrets{})
		if err != nil {
			t.Fatal(err)
		}
		var f *wire.SeatFile
		for i := range out.Files {
			if out.Files[i].Path == wire.SeatPamMount {
				f = &out.Files[i]
			}
		}
		if f == nil || f.Mode != 0o644 {
			t.Fatalf("%+v: no pam_mount.conf.xml 0644 in %+v", tc.h, out.Files)
		}
		var c conf
		if err := xml.Unmarshal(f.Content, &c); err != nil {
			t.Fatalf("%+v: not well-formed XML: %v\n%s", tc.h, err, f.Content)
		}
		want := volume{UID: "1000-2147483647", FSType: tc.h.Type, Server: tc.h.Server, Path: tc.h.Path, Mountpoint: "/home/%(USER)", Options: tc.opts}
		if len(c.Volumes) != 1 || c.Volumes[0] != want {
			t.Errorf("volumes %+v, want %+v", c.Volumes, want)
		}
		if c.Mkmnt.Enable != "1" || c.Mkmnt.Remove != "true" || c.Logout.Term != "yes" || c.Logout.Kill != "yes" {
			t.Errorf("%+v: mkmountpoint %+v logout %+v", tc.h, c.Mkmnt, c.Logout)
		}
	}
	bad := &model.Homes{Type: model.HomesNFS, Server: "files", Path: `/h/%(USER)" mountpoint="/etc`}
	if out, err := Render(Seat{Homes: bad}, "pc-a01", "lab-a", Secrets{}); err == nil || !strings.Contains(err.Error(), "homes.path") {
		t.Errorf("a path with a quote: %v %+v, want refused", err, out)
	}
}
