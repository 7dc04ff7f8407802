package model

import (
	"errors"
	"slices"
	"strconv"
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
		{"https API", func(b *BootServer) { b.APIURL = "https://overtime.example.org:8443" }, ""},
		{"plain-HTTP API", func(b *BootServer) { b.APIURL = "http://10.0.0.1:8080" }, "apiURL: invalid API URL"},
		{"API URL with a space", func(b *BootServer) { b.APIURL = "https://a b" }, "apiURL: invalid API URL"},
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

// The DNS servers and domain a full-DHCP boot server hands out go into dnsmasq's
// dhcp-option lines: only addresses a PC can ask and a plain domain pass, nothing that
// could end the line or add a value.
func TestBootServerDNS(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dns    []string
		domain string
		proxy  bool
		err    string // "" = accepted
	}{
		{"none", nil, "", false, ""},
		{"one", []string{"10.0.0.53"}, "", false, ""},
		{"outside the subnet", []string{"192.0.2.53"}, "", false, ""},
		{"three and a domain", []string{"10.0.0.53", "192.0.2.53", "198.51.100.53"}, "lab.example.org", false, ""},
		{"domain alone", nil, "example", false, ""},
		{"four", []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"}, "", false, "4 DNS servers, at most 3"},
		{"twice", []string{"10.0.0.53", "10.0.0.53"}, "", false, "given twice"},
		{"empty", []string{""}, "", false, "invalid IPv4 address"},
		{"IPv6", []string{"fd00::53"}, "", false, "invalid IPv4 address"},
		{"name", []string{"dns.example.org"}, "", false, "invalid IPv4 address"},
		{"unspecified", []string{"0.0.0.0"}, "", false, "not an address a PC can ask"},
		{"loopback", []string{"127.0.0.53"}, "", false, "not an address a PC can ask"},
		{"broadcast", []string{"255.255.255.255"}, "", false, "not an address a PC can ask"},
		{"multicast", []string{"224.0.0.251"}, "", false, "not an address a PC can ask"},
		{"comma in server", []string{"10.0.0.53,8.8.8.8"}, "", false, "invalid IPv4 address"},
		{"space in server", []string{"10.0.0.53 8.8.8.8"}, "", false, "invalid IPv4 address"},
		{"newline in server", []string{"10.0.0.53\ndhcp-boot=evil"}, "", false, "invalid IPv4 address"},
		{"quote in server", []string{`"10.0.0.53"`}, "", false, "invalid IPv4 address"},
		{"comma in domain", nil, "lab.example.org,evil.org", false, "invalid DNS domain"},
		{"space in domain", nil, "lab example.org", false, "invalid DNS domain"},
		{"newline in domain", nil, "lab.example.org\ndhcp-boot=evil", false, "invalid DNS domain"},
		{"quote in domain", nil, `lab"example.org`, false, "invalid DNS domain"},
		{"apostrophe in domain", nil, "lab'example.org", false, "invalid DNS domain"},
		{"trailing dot", nil, "lab.example.org.", false, "invalid DNS domain"},
		{"upper case", nil, "Lab.example.org", false, "invalid DNS domain"},
		{"address as domain", nil, "10.0.0.1", false, "invalid DNS domain"},
		{"proxy with servers", []string{"10.0.0.53"}, "", true, "hands out no DNS servers or domain"},
		{"proxy with domain", nil, "lab.example.org", true, "hands out no DNS servers or domain"},
	} {
		s := fullSite()
		b := &s.BootServers[0]
		if !tc.proxy {
			b.DHCP = DHCPFull
		}
		b.DNSServers, b.Domain = tc.dns, tc.domain
		err := s.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.err)
		}
		var inv *InvalidError
		if err != nil && (!errors.As(err, &inv) || inv.Conflict) {
			t.Errorf("%s: %v (%T) is not a plain *InvalidError", tc.name, err, err)
		}
	}
}

// The DNS fields are boot server fields of the diff; the order of the servers counts
// (the first is the PCs' first resolver).
func TestBootServerDNSDiff(t *testing.T) {
	a := fullSite()
	a.BootServers[0].DHCP = DHCPFull
	a.BootServers[0].DNSServers = []string{"10.0.0.53", "192.0.2.53"}
	for _, tc := range []struct {
		edit   func(b *BootServer)
		fields []string
	}{
		{func(b *BootServer) { b.DNSServers = []string{"192.0.2.53", "10.0.0.53"} }, []string{"dnsServers"}},
		{func(b *BootServer) { b.DNSServers = nil }, []string{"dnsServers"}},
		{func(b *BootServer) { b.Domain = "lab.example.org" }, []string{"domain"}},
		{func(b *BootServer) {}, nil},
	} {
		b := a.Clone()
		tc.edit(&b.BootServers[0])
		var got []string
		for _, c := range Diff(a, b) {
			got = append(got, c.Fields...)
		}
		if !slices.Equal(got, tc.fields) {
			t.Errorf("diff fields %v, want %v", got, tc.fields)
		}
	}
	// Clone copies the list: editing the clone leaves the original alone.
	c := a.Clone()
	c.BootServers[0].DNSServers[0] = "10.9.9.9"
	if a.BootServers[0].DNSServers[0] != "10.0.0.53" {
		t.Error("Clone shares DNSServers")
	}
}

// An exam's allow list: each entry an endpoint (names.ParseEndpoint), named by its index
// in the message; no duplicates, at most MaxExamAllow; no list on other kinds.
func TestExamAllow(t *testing.T) {
	many := make([]string, MaxExamAllow+1)
	for i := range many {
		many[i] = "10.0." + strconv.Itoa(i) + ".0/24"
	}
	for _, tc := range []struct {
		name  string
		kind  ExceptionKind
		allow []string
		err   string // "" = valid
	}{
		{name: "none", kind: ExceptionExam},
		{name: "names and networks", kind: ExceptionExam, allow: []string{"exam.uni.example:443", "10.0.5.0/24", "[2001:db8::1]:8443", "2001:db8:5::/48"}},
		{name: "at the bound", kind: ExceptionExam, allow: many[:MaxExamAllow]},
		{name: "over the bound", kind: ExceptionExam, allow: many, err: "exception exam: allow: 33 entries, at most 32"},
		{name: "bad entry named", kind: ExceptionExam, allow: []string{"exam.uni.example", "10.0.5.1/24"}, err: `exception exam: allow[1]: invalid endpoint "10.0.5.1/24": host bits set`},
		{name: "free text", kind: ExceptionExam, allow: []string{"exam; accept"}, err: "exception exam: allow[0]: invalid endpoint"},
		{name: "duplicate", kind: ExceptionExam, allow: []string{"10.0.5.7:443", "10.0.5.7:443"}, err: `allow[1]: "10.0.5.7:443" is allow[0] again`},
		{name: "same endpoint spelled twice", kind: ExceptionExam, allow: []string{"2001:db8::1", "2001:DB8::1"}, err: "is allow[0] again"},
		{name: "other kind", kind: "lecture", allow: []string{"exam.uni.example"}, err: "exception exam: allow: only exceptions of kind exam"},
	} {
		s := fullSite()
		s.Exceptions[0].Kind, s.Exceptions[0].Allow = tc.kind, tc.allow
		err := s.Validate()
		if tc.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var inv *InvalidError
		if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &inv) {
			t.Errorf("%s: Validate = %v, want an InvalidError containing %q", tc.name, err, tc.err)
		}
	}
}

// The allow list is a field of the exception's diff, compared as a set, and Clone copies it.
func TestExamAllowDiff(t *testing.T) {
	a := fullSite()
	b := a.Clone()
	b.Exceptions[0].Allow[0] = "exam2.uni.example"
	if a.Exceptions[0].Allow[0] != "exam.uni.example:443" {
		t.Fatal("Clone shares Allow")
	}
	var got []string
	for _, c := range Diff(a, b) {
		got = append(got, c.Fields...)
	}
	if !slices.Equal(got, []string{"allow"}) {
		t.Errorf("diff fields %v, want [allow]", got)
	}
}
