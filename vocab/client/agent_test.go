package client

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testPin = "sha256:" + strings.Repeat("ab", 32)

// The credential file: the token, and the CA pin when there is one; anything else is
// refused with the line named, as is a file others may read.
func TestCredentialFromFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          Credential
		err           string
	}{
		{"token", "ot1.pc1.secret\n", Credential{Token: "ot1.pc1.secret"}, ""},
		{"token and pin", "ot1.pc1.secret\nca-pin " + testPin + "\n", Credential{Token: "ot1.pc1.secret", CAPin: testPin}, ""},
		{"written by File", Credential{Token: "ot1.pc1.secret", CAPin: testPin}.File(), Credential{Token: "ot1.pc1.secret", CAPin: testPin}, ""},
		{"empty", "\n", Credential{}, "token on its first line"},
		{"token with a space", "ot1 pc1\n", Credential{}, "token on its first line"},
		{"bad pin", "ot1.pc1.secret\nca-pin sha256:xyz\n", Credential{}, "line 2: CA pin"},
		{"two pins", "ot1.pc1.secret\nca-pin " + testPin + "\nca-pin " + testPin + "\n", Credential{}, "line 3"},
		{"unknown line", "ot1.pc1.secret\nserver https://x\n", Credential{}, "line 2"},
	} {
		f := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
		if err := os.WriteFile(f, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := CredentialFromFile(f)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %+v %v, want %+v", tc.name, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.err)
		}
	}
	f := filepath.Join(dir, "open")
	if err := os.WriteFile(f, []byte("ot1.pc1.secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CredentialFromFile(f); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a file others can read: %v", err)
	}
}

// How an agent may reach its server: a pinned credential over https only, with the
// pinned configuration; an unpinned one over https (system roots) or plain HTTP.
func TestNewForAgent(t *testing.T) {
	pinned := Credential{Token: "ot1.pc1.s", CAPin: testPin}
	plain := Credential{Token: "ot1.pc1.s"}
	for _, tc := range []struct {
		url  string
		cred Credential
		err  string
		tls  bool // a transport of its own (the pin's)
	}{
		{"https://sm.uni.example:8443", pinned, "", true},
		{"https://sm.uni.example", plain, "", false},
		{"http://sm.uni.example:8080", plain, "", false},
		{"http://sm.uni.example:8080", pinned, "refusing plain HTTP", false},
		{"ftp://sm.uni.example", plain, "expected https", false},
		{"sm.uni.example:8080", plain, "expected https", false},
	} {
		c, err := NewForAgent(tc.url, tc.cred)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s %+v: %v, want an error containing %q", tc.url, tc.cred, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s %+v: %v", tc.url, tc.cred, err)
		case c.Token != tc.cred.Token || (c.HTTP != nil) != tc.tls:
			t.Errorf("%s %+v: client %+v", tc.url, tc.cred, c)
		}
	}
}
