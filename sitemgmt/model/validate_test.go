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
