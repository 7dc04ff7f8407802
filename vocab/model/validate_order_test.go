package model

import (
	"testing"
)

// Site.Validate runs one validator per entity in a fixed order and reports the first
// error: with two errors in a site, the API and the CLI show the one of the earlier check.
// Each case breaks the site twice; the want is the message of the earlier break.
func TestValidateReportsFirstErrorInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(s *Site)
		want string
	}{
		{"site before modes", func(s *Site) { s.Timezone = "Local"; s.Modes[1].Name = "BAD" },
			`invalid timezone "Local": use an IANA name like Europe/Berlin`},
		{"mode names before images", func(s *Site) { s.Modes[1].Name = "BAD"; s.Images[0].Current = "9" },
			`invalid mode name "BAD": use 1-63 characters a-z 0-9 . _ - starting with a letter or digit`},
		{"images before modes' fields", func(s *Site) { s.Images[0].Current = "9"; s.Modes[0].Kind = "weird" },
			`image desk: current version "9" is not a version of it`},
		{"a mode's image before its local-disk check", func(s *Site) { s.Modes[0].Image = "desk"; s.Modes[0].Kernel = "k" },
			`mode local: a local-disk mode boots no image`},
		{"a mode's local-disk check before its guest", func(s *Site) { s.Modes[0].Kernel = "k"; s.Modes[0].Guest = &Guest{Image: "vm"} },
			`mode local: a local-disk mode takes no kernel, initrd or kernel arguments`},
		{"mode by mode", func(s *Site) { s.Modes[2].Guest = &Guest{Image: "nope"}; s.Modes[1].Image = "nope" },
			`mode desktop: unknown image "nope"`},
		{"modes before the site's mode choices", func(s *Site) { s.Modes[1].VM = "vm"; s.DefaultMode = "nope" },
			`mode desktop: only course-vm modes start a VM`},
		{"mode choices before boot servers", func(s *Site) { s.DefaultMode = "nope"; s.BootServers[0].IP = "x" },
			`site default mode "nope" is not a defined mode`},
		{"a boot server's addresses before its range", func(s *Site) { s.BootServers[0].DHCP = "weird"; s.BootServers[0].Router = "10.9.0.1" },
			`boot server bs1: dhcp must be "full" or "proxy", not "weird"`},
		{"a boot server's range before its DNS", func(s *Site) { s.BootServers[0].Router = "10.0.0.254"; s.BootServers[0].Domain = "x.org" },
			`boot server bs1: a proxy-DHCP server hands out no router (10.0.0.254); remove it`},
		{"boot servers before pools", func(s *Site) { s.BootServers[0].IP = "x"; s.Pools[1].BootServer = "nope" },
			`boot server bs1: invalid IPv4 address "x"`},
		{"pools before hosts", func(s *Site) { s.Pools[1].BootServer = "nope"; s.Hosts[0].BootServer = "nope" },
			`pool lab-b: unknown boot server "nope"`},
		{"a host's addresses before its pool", func(s *Site) { s.Hosts[1].MAC = "x"; s.Hosts[1].Pool = "nope" },
			`host a2: invalid MAC address "x": expected six hex octets like 52:54:00:12:34:56`},
		{"hosts before exceptions", func(s *Site) { s.Hosts[1].Name = "a1"; s.Exceptions[0].Mode = "nope" },
			`duplicate host "a1"`},
		{"an exception's slots before its targets", func(s *Site) { s.Exceptions[0].End = s.Exceptions[0].Start; s.Exceptions[0].Targets = nil },
			`exception exam: end 2026-11-02T08:00:00Z is not after start 2026-11-02T08:00:00Z`},
		{"exceptions before roles", func(s *Site) { s.Exceptions[0].Targets[1].Host = ""; s.Roles[0].Role = "weird" },
			`exception exam: empty target`},
		{"a role's scope before its members", func(s *Site) { s.Roles[1].Pool = "nope"; s.Roles[1].Members = []string{"BAD UID"} },
			`role lab-a-admins: unknown pool "nope"`},
		{"roles before owners", func(s *Site) {
			s.Roles[1].Members = []string{"BAD UID"}
			s.Pools[0].RuleOwners = RuleOwners{"nope": "alice"}
		},
			`role lab-a-admins: invalid user id "BAD UID": use 1-32 characters a-z 0-9 _ . - starting with a letter or _`},
	} {
		s := fullSite()
		tc.edit(s)
		if err := s.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
}
