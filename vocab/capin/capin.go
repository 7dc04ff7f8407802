// Package capin pins the site manager's certificate authority for node agents: what a
// pin is, how it is computed, and how a TLS connection is checked against it.
//
// A PC cannot trust what the network tells it: its boot script, kernel command line and
// DHCP answers come over unauthenticated protocols, so the URL of the site manager may
// be anyone's. What a PC can trust is its host credential (on its OVERTIME-ID partition
// or sealed to its TPM): the credential carries the pin of the site's CA, and the agent
// then sends its token only over TLS to a server whose certificate that CA signed. The
// pin is of the CA, not of the server's certificate, so server certificates are renewed
// without touching PCs; it is the SHA-256 of the CA's public key (SubjectPublicKeyInfo,
// as RFC 7469), so a CA re-issued with the same key keeps its pin.
//
// The server must send the CA with its chain (`overtime serve --tls-cert` is the leaf,
// any intermediates and the CA, in that order): a PC has the pin, not the certificate.
package capin

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// Prefix starts every pin: sha256:HEX (64 lower-case hex digits).
const Prefix = "sha256:"

// Of is the pin of a CA certificate.
func Of(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return Prefix + hex.EncodeToString(sum[:])
}

// Check says what is wrong with a pin as written ("" when nothing).
func Check(pin string) error {
	h, ok := strings.CutPrefix(pin, Prefix)
	if !ok {
		return fmt.Errorf("CA pin %q: expected %s followed by 64 hex digits", pin, Prefix)
	}
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size || strings.ToLower(h) != h {
		return fmt.Errorf("CA pin %q: expected %s followed by 64 lower-case hex digits", pin, Prefix)
	}
	return nil
}

// FromChainPEM is the pin of the CA that ends a PEM certificate chain (what `overtime
// serve --tls-cert` reads): "" when the chain's last certificate is not a CA (a site
// whose server certificate comes from a public CA it does not send; its PCs trust the
// system's roots instead).
func FromChainPEM(chain []byte) (string, error) {
	var last *x509.Certificate
	for rest := chain; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return "", fmt.Errorf("certificate chain: %w", err)
		}
		last = c
	}
	if last == nil {
		return "", errors.New("certificate chain: no certificate")
	}
	if !last.IsCA {
		return "", nil
	}
	return Of(last), nil
}

// TLSConfig is a client configuration for the server host (a DNS name or IP address,
// the URL's host without the port) that trusts only a server whose chain holds the CA
// with the pin and whose certificate, signed by that CA (directly or through the chain's
// intermediates), is valid now for host. The system's roots play no part: a public CA
// cannot vouch for the site manager.
func TLSConfig(pin, host string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: host,
		// The standard verification would ask the system's roots; VerifyConnection does
		// it against the pinned CA alone (and runs on resumed sessions too). The name is
		// host, not the connection state's ServerName: for an IP address no name is sent
		// (SNI carries DNS names only), and an empty name would skip the check.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return Verify(pin, host, cs.PeerCertificates)
		},
	}
}

// MismatchError is a server that the pinned CA does not vouch for: not a transient
// failure, so callers say so instead of retrying in silence.
type MismatchError struct{ msg string }

func (e *MismatchError) Error() string { return e.msg }

func mismatch(format string, a ...any) error { return &MismatchError{fmt.Sprintf(format, a...)} }

// Verify checks a server's chain (leaf first) for name against the pin; a refusal is a
// *MismatchError.
func Verify(pin, name string, chain []*x509.Certificate) error {
	if len(chain) == 0 {
		return mismatch("the server sent no certificate")
	}
	if name == "" {
		return mismatch("no server name to check the certificate for")
	}
	var ca *x509.Certificate
	inter := x509.NewCertPool()
	for i, c := range chain {
		switch {
		case c.IsCA && Of(c) == pin:
			ca = c
		case i > 0:
			inter.AddCert(c)
		}
	}
	if ca == nil {
		return mismatch("the server's certificate (%s) does not come with the site's CA %s that this PC's credential pins: another server, or one whose --tls-cert lacks the CA at its end",
			chain[0].Subject, pin)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return mismatch("the server's certificate, checked against the pinned CA %s: %v", pin, err)
	}
	return nil
}
