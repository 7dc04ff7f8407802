package hostcred

import (
	"strings"
	"testing"
)

func TestNewParseVerify(t *testing.T) {
	tok, err := New("pc-a01")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "ot1.pc-a01.") || len(tok) != len("ot1.pc-a01.")+43 {
		t.Fatalf("token %q", tok)
	}
	if h, err := Parse(tok); err != nil || h != "pc-a01" {
		t.Fatalf("Parse = %q, %v", h, err)
	}
	stored := Hash(tok)
	if !strings.HasPrefix(stored, "sha256:") || len(stored) != 7+64 || strings.Contains(stored, tok) {
		t.Fatalf("hash %q", stored)
	}
	if !Verify(tok, stored) {
		t.Fatal("token does not verify against its own hash")
	}
	other, _ := New("pc-a01")
	if other == tok || Verify(other, stored) {
		t.Fatal("two tokens for one host are equal or cross-verify")
	}
	if Verify(tok, "") {
		t.Fatal("a token verifies against no credential")
	}
	for _, bad := range []string{"pc a", "*", "a.b", "pc*)(cn=*", ""} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

func TestParseRejects(t *testing.T) {
	good, _ := New("pc-a01")
	secret := good[len("ot1.pc-a01."):]
	for _, tc := range []string{
		"",
		"ot1",
		"ot1.pc-a01",
		"ot2.pc-a01." + secret,
		"OT1.pc-a01." + secret,
		"ot1..pc-a01." + secret,
		"ot1.pc-a01." + secret + ".x",
		"ot1.pc-a01." + secret[:42],    // 31.x bytes
		"ot1.pc-a01." + secret + "A",   // 33 bytes (not canonical)
		"ot1.pc-a01." + secret + "=",   // padding
		"ot1.PC-A01." + secret,         // upper case is not a host name
		"ot1.pc*)(cn=*." + secret,      // LDAP filter metacharacters
		"ot1.cn=x,ou=people." + secret, // DN metacharacters
		"ot1.pc-a01." + strings.Repeat("A", 200),
		"ot1.pc-a01." + strings.ReplaceAll(secret, secret[:1], "+"), // not base64url
	} {
		if h, err := Parse(tc); err == nil {
			t.Errorf("Parse(%q) = %q, accepted", tc, h)
		}
	}
}
