package capin

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type keyPair struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// issue makes a certificate for name signed by parent (nil: self-signed); ca makes it a
// CA, ips are its addresses.
func issue(t *testing.T, name string, parent *keyPair, ca bool, ips ...net.IP) *keyPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  ips,
	}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &keyPair{c, key}
}

// serve starts an HTTPS server sending chain (leaf first) and returns its URL.
func serve(t *testing.T, chain ...*keyPair) string {
	t.Helper()
	cert := tls.Certificate{PrivateKey: chain[0].key}
	for _, c := range chain {
		cert.Certificate = append(cert.Certificate, c.cert.Raw)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s.URL
}

// get fetches url (a server on 127.0.0.1) with the pinned configuration.
func get(url, pin string) error {
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: TLSConfig(pin, "127.0.0.1")}, Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// A pinned agent talks to the site's server, through an intermediate too, and to no
// other: not to a server that does not send the CA, not to one of another CA (however
// valid), not to a certificate for another address.
func TestTLSConfig(t *testing.T) {
	lo := net.IPv4(127, 0, 0, 1)
	site := issue(t, "site CA", nil, true)
	inter := issue(t, "site intermediate", site, true)
	other := issue(t, "other CA", nil, true)
	pin := Of(site.cert)
	for _, tc := range []struct {
		name  string
		chain []*keyPair
		want  string // "" = accepted
	}{
		{"leaf and CA", []*keyPair{issue(t, "sm", site, false, lo), site}, ""},
		{"through an intermediate", []*keyPair{issue(t, "sm", inter, false, lo), inter, site}, ""},
		{"CA missing from the chain", []*keyPair{issue(t, "sm", site, false, lo)}, "does not come with the site's CA"},
		{"another CA", []*keyPair{issue(t, "sm", other, false, lo), other}, "does not come with the site's CA"},
		{"another CA's leaf with the site's CA appended", []*keyPair{issue(t, "sm", other, false, lo), site}, "checked against the pinned CA"},
		{"another address", []*keyPair{issue(t, "sm", site, false, net.IPv4(10, 9, 9, 9)), site}, "checked against the pinned CA"},
	} {
		err := get(serve(t, tc.chain...), pin)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	} // No name to check: refused, never a chain accepted for any address.
	if err := Verify(pin, "", []*x509.Certificate{issue(t, "sm", site, false, lo).cert, site.cert}); err == nil {
		t.Error("Verify without a name accepted the chain")
	}
}

func TestFromChainPEM(t *testing.T) {
	site := issue(t, "site CA", nil, true)
	leaf := issue(t, "sm", site, false, net.IPv4(127, 0, 0, 1))
	enc := func(cs ...*keyPair) []byte {
		var b []byte
		for _, c := range cs {
			b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})...)
		}
		return b
	}
	if pin, err := FromChainPEM(enc(leaf, site)); err != nil || pin != Of(site.cert) {
		t.Errorf("leaf+CA: %q %v, want %s", pin, err, Of(site.cert))
	}
	if pin, err := FromChainPEM(enc(leaf)); err != nil || pin != "" {
		t.Errorf("leaf alone: %q %v, want no pin", pin, err)
	}
	if _, err := FromChainPEM([]byte("not pem")); err == nil {
		t.Error("no certificate: accepted")
	}
	if err := Check(Of(site.cert)); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "sha256:", "sha1:" + strings.Repeat("a", 40), Prefix + strings.Repeat("A", 64), Prefix + strings.Repeat("a", 63), Prefix + strings.Repeat("g", 64)} {
		if Check(bad) == nil {
			t.Errorf("Check(%q) accepted", bad)
		}
	}
}
