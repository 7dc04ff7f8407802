package sssdtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without a host /etc/krb5.conf to bind over, the seat sees the PC's krb5.conf through
// a namespace-private overlay of /etc, the rest of /etc unchanged, and the host's /etc
// gains nothing.
func TestKrb5ConfOverlay(t *testing.T) {
	hostKrb5Conf = filepath.Join(t.TempDir(), "absent")
	t.Cleanup(func() { hostKrb5Conf = "/etc/krb5.conf" })
	before, err := os.ReadDir("/etc")
	if err != nil {
		t.Fatal(err)
	}
	etc := t.TempDir()
	if err := os.Mkdir(filepath.Join(etc, "sssd"), 0o711); err != nil {
		t.Fatal(err)
	}
	conf := "[sssd]\nconfig_file_version = 2\nservices = nss, pam\ndomains = files\n\n[domain/files]\nid_provider = files\n"
	if err := os.WriteFile(filepath.Join(etc, "sssd", "sssd.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	const krb5 = "[libdefaults]\n\tdefault_realm = OVERLAY.EXAMPLE\n"
	if err := os.WriteFile(filepath.Join(etc, "krb5.conf"), []byte(krb5), 0o644); err != nil {
		t.Fatal(err)
	}
	s := Start(t, etc)
	if out, err := s.Run(context.Background(), "", "cat", "/etc/krb5.conf"); err != nil || out != krb5 {
		t.Errorf("/etc/krb5.conf in the seat: %q, %v", out, err)
	}
	if out, err := s.Getent("passwd", "root"); err != nil || !strings.HasPrefix(out, "root:x:0:0:") {
		t.Errorf("getent passwd root in the seat: %q, %v", out, err)
	}
	if out, err := s.Run(context.Background(), "", "findmnt", "-n", "-o", "FSTYPE", "/etc"); err != nil || strings.TrimSpace(out) != "overlay" {
		t.Errorf("/etc in the seat is %q (%v), want an overlay", out, err)
	}
	after, err := os.ReadDir("/etc")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the host's /etc changed: %d entries before, %d after", len(before), len(after))
	}
}
