package model

import (
	"fmt"
	"strings"
	"time"
)

// CheckDeletedReferences refuses a change that deletes an entity something in next still
// uses, naming what uses it and how, e.g.
//
//	mode desktop is used by exception exam-1 (targets pool lab-a, 2026-12-09 08:00-13:00); delete or change it first
//
// Validate would report the same change from the user's side ("exception exam-1: unknown
// mode desktop"), which reads as if the exception were wrong, not the deletion. Only
// entities that exist in cur and are gone from next are checked, so a site file that
// names a mode that never existed still gets Validate's message.
func CheckDeletedReferences(cur, next *Site) error {
	if cur == nil || next == nil {
		return nil
	}
	loc, err := next.Location()
	if err != nil {
		loc = time.UTC
	}
	for _, m := range cur.Modes {
		if next.Mode(m.Name) == nil {
			if err := refused("mode", m.Name, next.modeUsers(m.Name, loc)); err != nil {
				return err
			}
		}
	}
	for _, im := range cur.Images {
		if next.Image(im.Name) == nil {
			if err := refused("image", im.Name, next.imageUsers(im.Name)); err != nil {
				return err
			}
			continue
		}
		for _, v := range im.Versions {
			if next.Image(im.Name).Version(v.Version) == nil {
				if err := refused("image "+im.Name+" version", v.Version, next.versionUsers(im.Name, v.Version)); err != nil {
					return err
				}
			}
		}
	}
	for _, b := range cur.BootServers {
		if next.BootServer(b.Name) == nil {
			if err := refused("boot server", b.Name, next.bootServerUsers(b.Name)); err != nil {
				return err
			}
		}
	}
	// Hosts and pools by name: a linear look-up per entity was quadratic (72 s for a
	// 100,000-host site, issue 18).
	nextPools := make(map[string]bool, len(next.Pools))
	for i := range next.Pools {
		nextPools[next.Pools[i].Name] = true
	}
	for _, p := range cur.Pools {
		if !nextPools[p.Name] {
			if err := refused("pool", p.Name, next.poolUsers(p.Name, loc)); err != nil {
				return err
			}
		}
	}
	nextHosts := make(map[string]bool, len(next.Hosts))
	for i := range next.Hosts {
		nextHosts[next.Hosts[i].Name] = true
	}
	for _, h := range cur.Hosts {
		if !nextHosts[h.Name] {
			if err := refused("host", h.Name, next.hostUsers(h.Name, loc)); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxUsersNamed bounds the list in a refusal; a mode used by 300 host rules is reported
// with the first few and a count.
const maxUsersNamed = 3

func refused(what, name string, users []string) error {
	if len(users) == 0 {
		return nil
	}
	list := users
	more := ""
	if len(list) > maxUsersNamed {
		list = list[:maxUsersNamed]
		more = fmt.Sprintf(" and %d more", len(users)-maxUsersNamed)
	}
	them := "it"
	if len(users) > 1 {
		them = "them"
	}
	// 400 like the Validate error this replaces: clients already handle it.
	return invalid("%s %s is used by %s%s; delete or change %s first", what, name, strings.Join(list, ", "), more, them)
}

// describeException names an exception with its targets and time span in the site's zone.
func describeException(e *Exception, loc *time.Location) string {
	var t []string
	for _, x := range e.Targets {
		if x.Pool != "" {
			t = append(t, "pool "+x.Pool)
		} else if x.Host != "" {
			t = append(t, "host "+x.Host)
		}
	}
	s, en := e.Start.In(loc), e.End.In(loc)
	span := s.Format("2006-01-02 15:04") + "-" + en.Format("15:04")
	if s.Format("2006-01-02") != en.Format("2006-01-02") {
		span = s.Format("2006-01-02 15:04") + " - " + en.Format("2006-01-02 15:04")
	}
	owner := ""
	if e.Owner != "" {
		owner = ", booked by " + e.Owner
	}
	return fmt.Sprintf("exception %s (targets %s, %s%s)", e.Name, strings.Join(t, " and "), span, owner)
}

// ruleMode is the mode a weekly rule names: its last word ("DAYS HH:MM-HH:MM MODE").
func ruleMode(rule string) string {
	f := strings.Fields(rule)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

func (s *Site) modeUsers(mode string, loc *time.Location) []string {
	var u []string
	if s.DefaultMode == mode {
		u = append(u, "the site (default mode)")
	}
	if s.UnknownMode == mode {
		u = append(u, "the site (mode of unknown hosts)")
	}
	for i := range s.Exceptions {
		if s.Exceptions[i].Mode == mode {
			u = append(u, describeException(&s.Exceptions[i], loc))
		}
	}
	for _, p := range s.Pools {
		for _, r := range p.Weekly {
			if ruleMode(r) == mode {
				u = append(u, fmt.Sprintf("pool %s (rule %q)", p.Name, r))
			}
		}
	}
	for _, h := range s.Hosts {
		for _, r := range h.Weekly {
			if ruleMode(r) == mode {
				u = append(u, fmt.Sprintf("host %s (rule %q)", h.Name, r))
			}
		}
	}
	return u
}

// ImageUse is one way a mode uses an image.
type ImageUse struct {
	Mode *Mode
	As   ImageUseKind
	Pin  string // the version the mode pins ("": it follows the image's current)
}

// ImageUseKind is how a mode uses an image.
type ImageUseKind string

const (
	UseBoot     ImageUseKind = "boots it"
	UseCourseVM ImageUseKind = "starts it as the course VM"
	UseGuest    ImageUseKind = "runs it as the compute guest"
)

// ImageUses lists every use of image by the site's modes, in mode order.
func (s *Site) ImageUses(image string) []ImageUse {
	var u []ImageUse
	for i := range s.Modes {
		m := &s.Modes[i]
		if m.Image == image {
			u = append(u, ImageUse{Mode: m, As: UseBoot, Pin: m.ImageVersion})
		}
		if m.VM == image {
			u = append(u, ImageUse{Mode: m, As: UseCourseVM})
		}
		if m.Guest != nil && m.Guest.Image == image {
			u = append(u, ImageUse{Mode: m, As: UseGuest, Pin: m.Guest.Version})
		}
	}
	return u
}

func (s *Site) imageUsers(image string) []string {
	var u []string
	for _, use := range s.ImageUses(image) {
		u = append(u, "mode "+use.Mode.Name+" ("+string(use.As)+")")
	}
	return u
}

func (s *Site) versionUsers(image, version string) []string {
	var u []string
	if im := s.Image(image); im != nil && im.Current == version {
		u = append(u, "image "+image+" (its current version)")
	}
	for _, m := range s.Modes {
		if m.Image == image && m.ImageVersion == version {
			u = append(u, "mode "+m.Name+" (pinned to it)")
		}
		if m.Guest != nil && m.Guest.Image == image && m.Guest.Version == version {
			u = append(u, "mode "+m.Name+" (its compute guest is pinned to it)")
		}
	}
	return u
}

func (s *Site) bootServerUsers(server string) []string {
	var u []string
	for _, p := range s.Pools {
		if p.BootServer == server {
			u = append(u, "pool "+p.Name)
		}
	}
	for _, h := range s.Hosts {
		if h.BootServer == server {
			u = append(u, "host "+h.Name)
		}
	}
	for _, r := range s.Roles {
		if r.BootServer == server {
			u = append(u, "role "+r.Name)
		}
	}
	return u
}

func (s *Site) poolUsers(pool string, loc *time.Location) []string {
	var u []string
	var hosts []string
	for _, h := range s.Hosts {
		if h.Pool == pool {
			hosts = append(hosts, h.Name)
		}
	}
	switch {
	case len(hosts) == 1:
		u = append(u, "host "+hosts[0])
	case len(hosts) > 1:
		// One entry for all hosts: a room of 60 PCs is one reason, not 60.
		u = append(u, fmt.Sprintf("%d hosts (%s)", len(hosts), shortList(hosts)))
	}
	for i := range s.Exceptions {
		for _, t := range s.Exceptions[i].Targets {
			if t.Pool == pool {
				u = append(u, describeException(&s.Exceptions[i], loc))
				break
			}
		}
	}
	for _, r := range s.Roles {
		if r.Pool == pool {
			u = append(u, "role "+r.Name)
		}
	}
	return u
}

func (s *Site) hostUsers(host string, loc *time.Location) []string {
	var u []string
	for i := range s.Exceptions {
		for _, t := range s.Exceptions[i].Targets {
			if t.Host == host {
				u = append(u, describeException(&s.Exceptions[i], loc))
				break
			}
		}
	}
	return u
}

func shortList(names []string) string {
	if len(names) <= maxUsersNamed {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:maxUsersNamed], ", ") + ", ..."
}
