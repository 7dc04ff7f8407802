package model

import (
	"strings"
	"testing"
)

// Deleting something the rest of the site uses is refused with a message that names each
// user and why, instead of Validate's "unknown ..." about the user.
func TestCheckDeletedReferences(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(s *Site)
		want   string // "" = allowed
	}{
		{"mode used by the site default", func(s *Site) { s.Modes = drop(s.Modes, "local", modeName) },
			"mode local is used by the site (default mode), the site (mode of unknown hosts); delete or change them first"},
		{"mode used by an exception", func(s *Site) {
			s.Modes = drop(s.Modes, "course", modeName)
			s.Host("a2").Weekly = nil
		}, `mode course is used by exception exam (targets pool lab-b and host a2, 2026-11-02 09:00-11:00); delete or change it first`},
		{"mode used by rules of pools and hosts, and a booked exception", func(s *Site) {
			s.Modes = drop(s.Modes, "desktop", modeName)
			s.Exceptions = append(s.Exceptions, Exception{Name: "b", Kind: "lecture", Start: t0, End: t0.Add(26 * 3600e9), Mode: "desktop", Targets: []Target{{Host: "a1"}}, Owner: "carol"})
			s.Host("a1").Weekly = []string{"tue 08:00-10:00 desktop"}
		}, `mode desktop is used by exception b (targets host a1, 2026-11-02 09:00 - 2026-11-03 11:00, booked by carol), pool lab-a (rule "mon-fri 08:00-18:00 desktop"), host a1 (rule "tue 08:00-10:00 desktop"); delete or change them first`},
		{"image booted by a mode", func(s *Site) { s.Images = drop(s.Images, "desk", imageName) },
			"image desk is used by mode desktop (boots it), mode cluster (boots it), mode course (boots it); delete or change them first"},
		{"course VM image", func(s *Site) { s.Images = drop(s.Images, "vm", imageName) },
			"image vm is used by mode course (starts it as the course VM); delete or change it first"},
		{"pinned version", func(s *Site) { s.Image("desk").Versions = s.Image("desk").Versions[1:] },
			"image desk version 1 is used by mode cluster (pinned to it); delete or change it first"},
		{"unpinned version may go", func(s *Site) { s.Image("desk").Versions = s.Image("desk").Versions[:1] }, ""},
		{"boot server of pools and hosts", func(s *Site) { s.BootServers = nil },
			"boot server bs1 is used by pool lab-a, host b1; delete or change them first"},
		{"pool with hosts, exception and role", func(s *Site) { s.Pools = drop(s.Pools, "lab-a", poolName) },
			"pool lab-a is used by 2 hosts (a1, a2), role lab-a-admins; delete or change them first"},
		{"host named by an exception", func(s *Site) { s.Hosts = drop(s.Hosts, "a2", hostName) },
			"host a2 is used by exception exam (targets pool lab-b and host a2, 2026-11-02 09:00-11:00); delete or change it first"},
		{"many users are cut short", func(s *Site) {
			s.Modes = drop(s.Modes, "course", modeName)
			s.Exceptions = nil
			for _, h := range []string{"a1", "b1"} {
				s.Host(h).Weekly = []string{"mon 08:00-10:00 course", "tue 08:00-10:00 course"}
			}
		}, `mode course is used by host a1 (rule "mon 08:00-10:00 course"), host a1 (rule "tue 08:00-10:00 course"), host a2 (rule "mon 08:00-10:00 course") and 2 more; delete or change them first`},
		{"deleting the users too is fine", func(s *Site) {
			s.Exceptions = nil
			s.Hosts = drop(s.Hosts, "a2", hostName)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := fullSite()
			next := cur.Clone()
			tc.change(next)
			err := CheckDeletedReferences(cur, next)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func modeName(m *Mode) string   { return m.Name }
func imageName(m *Image) string { return m.Name }
func poolName(m *Pool) string   { return m.Name }
func hostName(m *Host) string   { return m.Name }

func drop[T any](list []T, name string, key func(*T) string) []T {
	var out []T
	for i := range list {
		if key(&list[i]) != name {
			out = append(out, list[i])
		}
	}
	return out
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestValidateOwners(t *testing.T) {
	s := fullSite()
	s.Pool("lab-a").RuleOwners = RuleOwners{"sun 08:00-10:00 desktop": "carol"}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "not one of its weekly rules") {
		t.Errorf("owner of a missing rule: %v", err)
	}
	s = fullSite()
	s.Exceptions[0].Owner = "Carol Smith"
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "invalid user id") {
		t.Errorf("bad owner: %v", err)
	}
}
