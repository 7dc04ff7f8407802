package model

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// maxDiffValue bounds one value in a field diff line (a long rule list or policy stays
// readable, and an audit entry stays small).
const maxDiffValue = 160

// FieldDiff describes what a change did to its entity's fields, one line per field:
// `weekly: ["mon-fri 08:00-18:00 desktop"] → ["mon-fri 08:00-20:00 desktop"]` for a
// modify, every set field's value for an add (`ip: "10.0.0.5"`) and a delete (what was
// removed). Values are compact JSON, cut at maxDiffValue bytes. cur and next are the
// sites before and after the write; a change naming nothing either has gives no lines.
func FieldDiff(cur, next *Site, c Change) []string {
	old, neu := entityFields(cur, c), entityFields(next, c)
	var fields []string
	switch c.Op {
	case OpModify:
		fields = c.Fields
	case OpAdd:
		fields = sortedKeys(neu)
	case OpDelete:
		fields = sortedKeys(old)
	}
	var out []string
	for _, f := range fields {
		if f == "name" && c.Op != OpModify {
			continue
		}
		o, n := diffValue(old, f), diffValue(neu, f)
		switch c.Op {
		case OpModify:
			if l, ok := listDiff(old, neu, f); ok {
				out = append(out, f+": "+l)
				continue
			}
			out = append(out, f+": "+o+" → "+n)
		case OpAdd:
			out = append(out, f+": "+n)
		case OpDelete:
			out = append(out, f+": "+o)
		}
	}
	return out
}

// listDiff describes a change of a list of strings (weekly rules, members, targets by
// name) by what it removed and added, `− "a"; + "b" (booked by alice)`, where whole
// lists would not fit a line. ok is false when the field is not such a list on both sides.
func listDiff(old, neu map[string]json.RawMessage, f string) (string, bool) {
	var ol, nl []string
	if o, ok := old[f]; ok && json.Unmarshal(o, &ol) != nil {
		return "", false
	}
	if n, ok := neu[f]; ok && json.Unmarshal(n, &nl) != nil {
		return "", false
	}
	if ol == nil && nl == nil {
		return "", false
	}
	var owners map[string]string
	if f == "weekly" {
		_ = json.Unmarshal(neu["ruleOwners"], &owners)
	}
	in := func(list []string, v string) bool {
		for _, x := range list {
			if x == v {
				return true
			}
		}
		return false
	}
	var parts []string
	for _, v := range ol {
		if !in(nl, v) {
			parts = append(parts, "− "+strconv.Quote(v))
		}
	}
	for _, v := range nl {
		if !in(ol, v) {
			p := "+ " + strconv.Quote(v)
			if who := owners[v]; who != "" {
				p += " (booked by " + who + ")"
			}
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		return "same entries, other order or bookings", true
	}
	return strings.Join(parts, "; "), true
}

// diffValue is a field's value for a diff line; a rule list carries its bookings
// (weekly and ruleOwners change together).
func diffValue(m map[string]json.RawMessage, f string) string {
	v, ok := m[f]
	if !ok {
		return "—"
	}
	s := string(v)
	if f == "weekly" {
		if o, ok := m["ruleOwners"]; ok {
			s += " booked " + string(o)
		}
	}
	if len(s) > maxDiffValue {
		cut := maxDiffValue
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// entityFields is the JSON object of the entity c names in s (fields left out by
// omitempty, and nulls, are absent), or nil.
func entityFields(s *Site, c Change) map[string]json.RawMessage {
	if s == nil {
		return nil
	}
	var v any
	switch c.Kind {
	case EntitySite:
		v = struct {
			Name         string        `json:"name"`
			Timezone     string        `json:"timezone"`
			DefaultMode  string        `json:"defaultMode"`
			UnknownMode  string        `json:"unknownMode,omitempty"`
			DesktopLogin *DesktopLogin `json:"desktopLogin,omitempty"`
			Printing     *Printing     `json:"printing,omitempty"`
			Homes        *Homes        `json:"homes,omitempty"`
		}{s.Name, s.Timezone, s.DefaultMode, s.UnknownMode, s.DesktopLogin, s.Printing, s.Homes}
	case EntityPool:
		if p := s.Pool(c.Name); p != nil {
			v = p
		}
	case EntityHost:
		if h := s.Host(c.Name); h != nil {
			v = h
		}
	case EntityBootServer:
		if b := s.BootServer(c.Name); b != nil {
			v = b
		}
	case EntityMode:
		if m := s.Mode(c.Name); m != nil {
			v = m
		}
	case EntityImage:
		if im := s.Image(c.Name); im != nil {
			cp := *im
			cp.Versions = nil // versions are their own changes
			v = cp
		}
	case EntityImageVersion:
		image, version := SplitImageVersionName(c.Name)
		if im := s.Image(image); im != nil {
			for i := range im.Versions {
				if im.Versions[i].Version == version {
					v = im.Versions[i]
				}
			}
		}
	case EntityException:
		if e := s.Exception(c.Name); e != nil {
			v = e
		}
	case EntityRole:
		if r := s.Role(c.Name); r != nil {
			v = r
		}
	}
	if v == nil {
		return nil
	}
	// Not json.Marshal: it writes "<" as \u003c, which a reader of the audit log should
	// not have to decode (the log's renderers escape for their own formats).
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b.Bytes(), &m) != nil {
		return nil
	}
	for k, raw := range m {
		if strings.TrimSpace(string(raw)) == "null" {
			delete(m, k)
		}
	}
	return m
}
