package ldapstore

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Every field of the model must be stored: when the model grows a field, this fails until
// the codec (and the schema) learn it, instead of the field being silently dropped.
func TestEveryModelFieldIsStored(t *testing.T) {
	l := newLayout("dc=example,dc=org")
	for _, tc := range []struct {
		v    any
		e    entry
		skip []string // fields stored otherwise: naming attribute, child entries
	}{
		{model.Site{}, siteEntry(&model.Site{}), []string{"pools", "hosts", "bootServers", "modes", "images", "exceptions", "roles"}},
		// ruleOwners is stored with the rules: a booked rule goes to otBookedRule ("weekly").
		{model.Pool{}, poolEntry(&model.Pool{}), []string{"name", "ruleOwners"}},
		{model.Host{}, hostEntry(&model.Host{}), []string{"name", "ruleOwners"}},
		{model.BootServer{}, bootServerEntry(&model.BootServer{}), []string{"name"}},
		{model.Mode{}, modeEntry(&model.Mode{}), []string{"name"}},
		{model.Image{}, imageEntry(&model.Image{}), []string{"name", "versions"}},
		{model.ImageVersion{}, versionEntry(&model.ImageVersion{}), []string{"version"}},
		{model.Exception{}, exceptionEntry(&model.Exception{}), []string{"name"}},
		{model.RoleGrant{}, l.roleEntry(&model.RoleGrant{}), []string{"name"}},
	} {
		typ := reflect.TypeOf(tc.v)
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if slices.Contains(tc.skip, name) {
				continue
			}
			if !slices.ContainsFunc(tc.e.attrs, func(a attr) bool { return a.field == name }) {
				t.Errorf("%s.%s (%q) has no LDAP attribute", typ.Name(), typ.Field(i).Name, name)
			}
		}
	}
}

func TestGeneralizedTime(t *testing.T) {
	for _, tc := range []time.Time{
		time.Date(2026, 12, 9, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 12, 9, 10, 0, 0, 0, berlin),
		time.Date(2026, 3, 29, 2, 30, 0, 0, berlin), // in the spring-forward gap
		time.Date(2026, 11, 21, 9, 30, 15, 123456789, time.UTC),
		time.Date(2026, 11, 21, 9, 30, 15, 100000000, time.UTC),
		time.Date(1999, 1, 1, 0, 0, 0, 1, time.UTC),
	} {
		v := genTime(tc)
		got, err := parseGenTime(v)
		if err != nil || !got.Equal(tc) || got.Location() != time.UTC {
			t.Errorf("%v -> %q -> %v, %v", tc, v, got, err)
		}
	}
	if v := genTime(time.Date(2026, 12, 9, 10, 0, 0, 0, berlin)); v != "20261209090000Z" {
		t.Errorf("genTime = %q", v)
	}
	// Forms other tools write.
	for v, want := range map[string]time.Time{
		"20261209100000+0100":   time.Date(2026, 12, 9, 9, 0, 0, 0, time.UTC),
		"202612091000Z":         time.Date(2026, 12, 9, 10, 0, 0, 0, time.UTC),
		"20261209100000.5Z":     time.Date(2026, 12, 9, 10, 0, 0, 500000000, time.UTC),
		"20261209100000,25Z":    time.Date(2026, 12, 9, 10, 0, 0, 250000000, time.UTC),
		"20261209100000.5-0130": time.Date(2026, 12, 9, 11, 30, 0, 500000000, time.UTC),
	} {
		if got, err := parseGenTime(v); err != nil || !got.Equal(want) {
			t.Errorf("parseGenTime(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, bad := range []string{"", "2026", "tomorrow", "20261309100000Z"} {
		if _, err := parseGenTime(bad); err == nil {
			t.Errorf("parseGenTime(%q) accepted", bad)
		}
	}
}
