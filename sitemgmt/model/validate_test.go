package model

import (
	"errors"
	"strings"
	"testing"
)

// TestNormalizeMACs: Normalize canonicalises every spelling names.MAC accepts, and
// Validate (which runs after it in service.Update) refuses what was not canonicalised.
func TestNormalizeMACs(t *testing.T) {
	for _, tc := range []struct {
		mac, want, err string // err: expected message part; "" = accepted
	}{
		{mac: "52:54:00:00:00:01", want: "52:54:00:00:00:01"},
		{mac: "52-54-00-0A-0B-0C", want: "52:54:00:0a:0b:0c"},
		{mac: "5254.000a.0b0c", want: "52:54:00:0a:0b:0c"},
		{mac: "nope", err: `host a1: invalid MAC address "nope"`},
		{mac: "01:00:5e:00:00:01", err: "multicast"},
	} {
		s := fullSite()
		s.Hosts[0].MAC = tc.mac
		if err := s.Validate(); (err == nil) != (tc.mac == tc.want) {
			t.Errorf("%s: Validate before Normalize = %v", tc.mac, err)
		}
		err := s.Normalize()
		if tc.err != "" {
			var inv *InvalidError
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &inv) {
				t.Errorf("%s: Normalize = %v, want an InvalidError containing %q", tc.mac, err, tc.err)
			}
			continue
		}
		if err != nil || s.Hosts[0].MAC != tc.want {
			t.Errorf("%s: Normalize = %v, MAC %q; want %q", tc.mac, err, s.Hosts[0].MAC, tc.want)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: Validate after Normalize: %v", tc.mac, err)
		}
	}
}

// The model's checks are those of package names, as *InvalidError (HTTP 400).
func TestValidatorsAreInvalidErrors(t *testing.T) {
	_, macErr := NormalizeMAC("x")
	_, cidrErr := ValidCIDR("x")
	for _, err := range []error{ValidName("pool", "X"), ValidHostname("X"), macErr, ValidIP("x"), cidrErr,
		ValidKernelArgs("a;b"), ValidRelPath("image", "../x"), ValidUID("X"), validText("room", "a\nb")} {
		var inv *InvalidError
		if !errors.As(err, &inv) || inv.Conflict {
			t.Errorf("%v (%T) is not a plain *InvalidError", err, err)
		}
	}
	for _, err := range []error{ValidName("pool", "x"), ValidHostname("x"), ValidIP("10.0.0.1"), ValidUID("x")} {
		if err != nil {
			t.Errorf("valid value refused: %v", err)
		}
	}
}

// Boot server fields are checked with the renderers' own definitions: a value the
// renderers would refuse is refused at write time, with the boot server named.
func TestBootServerFieldsRenderable(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b *BootServer)
		err  string // "" = accepted
	}{
		{"plain URL", func(b *BootServer) { b.HTTPURL = "http://10.0.0.1:8080/overtime/" }, ""},
		{"comma in URL", func(b *BootServer) { b.HTTPURL = "http://10.0.0.1:8080/a,b" }, "invalid boot server HTTP URL"},
		{"user in URL", func(b *BootServer) { b.HTTPURL = "http://u@10.0.0.1" }, "invalid boot server HTTP URL"},
		{"percent in URL", func(b *BootServer) { b.HTTPURL = "http://10.0.0.1/%41" }, "invalid boot server HTTP URL"},
		{"IPv6 URL", func(b *BootServer) { b.HTTPURL = "http://[fd00::1]:8080" }, "invalid boot server HTTP URL"},
		{"NFS DNS name", func(b *BootServer) { b.NFSServer = "nfs.example.org" }, ""},
		{"NFS empty label", func(b *BootServer) { b.NFSServer = "nfs..example.org" }, "invalid NFS server"},
		{"proxy router", func(b *BootServer) { b.DHCP, b.RangeFrom, b.RangeTo, b.Router = DHCPProxy, "", "", b.IP }, "hands out no router"},
	} {
		s := fullSite()
		tc.edit(&s.BootServers[0])
		err := s.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.err)
		}
	}
}
