package kdctest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/kdctest"
)

// client runs a Kerberos client tool against the KDC's realm with its own krb5.conf
// (Krb5Conf) and a ccache in dir.
func client(t *testing.T, k *kdctest.KDC, dir, stdin, name string, args ...string) (string, error) {
	t.Helper()
	conf := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(conf, []byte(k.Krb5Conf()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KRB5_CONFIG="+conf, "KRB5CCNAME=FILE:"+filepath.Join(dir, "ccache"))
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestKDC(t *testing.T) {
	k := kdctest.Start(t, "UNI.EXAMPLE")
	if k.Addr != k.Host+":"+itoa(k.Port) || k.Host != "127.0.0.1" {
		t.Fatalf("address %q, host %q, port %d", k.Addr, k.Host, k.Port)
	}
	k.AddPrincipal(t, "jdoe", "krb-secret")
	dir := t.TempDir()

	if out, err := client(t, k, dir, "wrong\n", "kinit", "jdoe"); err == nil {
		t.Errorf("kinit with a wrong password succeeded:\n%s", out)
	}
	if out, err := client(t, k, dir, "krb-secret\n", "kinit", "jdoe"); err != nil {
		t.Fatalf("kinit: %v\n%s", err, out)
	}
	out, err := client(t, k, dir, "", "klist")
	if err != nil || !strings.Contains(out, "Default principal: jdoe@UNI.EXAMPLE") || !strings.Contains(out, "krbtgt/UNI.EXAMPLE@UNI.EXAMPLE") {
		t.Errorf("klist: %v\n%s", err, out)
	}

	t.Run("keytab", func(t *testing.T) {
		k.AddRandKey(t, "host/pc1.example.org")
		kt := filepath.Join(dir, "pc1.keytab")
		if err := os.WriteFile(kt, k.Keytab(t, "host/pc1.example.org"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := client(t, k, dir, "", "kinit", "-k", "-t", kt, "host/pc1.example.org"); err != nil {
			t.Fatalf("kinit -k: %v\n%s", err, out)
		}
		out, err := client(t, k, dir, "", "klist")
		if err != nil || !strings.Contains(out, "Default principal: host/pc1.example.org@UNI.EXAMPLE") {
			t.Errorf("klist: %v\n%s", err, out)
		}
		out, err = client(t, k, dir, "", "klist", "-k", kt)
		if err != nil || !strings.Contains(out, "host/pc1.example.org@UNI.EXAMPLE") {
			t.Errorf("klist -k: %v\n%s", err, out)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }
