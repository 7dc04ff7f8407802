package model

import (
	"strings"
	"testing"
)

// A home is one file server, one path with %(USER) and inert mount options; every
// refusal names the field. A pool's replaces the site's.
func TestHomesValidate(t *testing.T) {
	nfs := func(f func(*Homes)) Homes {
		h := Homes{Type: HomesNFS, Server: "files.uni.example", Path: "/export/homes/%(USER)"}
		f(&h)
		return h
	}
	for _, tc := range []struct {
		h    Homes
		want string
	}{
		{nfs(func(*Homes) {}), ""},
		{nfs(func(h *Homes) { h.Server, h.Options = "10.0.0.7", "vers=4.2,sec=sys" }), ""},
		{Homes{Type: HomesCIFS, Server: "dc1.ad.uni.example", Path: "users$/%(USER)", Options: "vers=3.0,sec=krb5"}, ""},
		{Homes{Type: HomesCIFS, Server: "files", Path: "%(USER)"}, ""},
		{nfs(func(h *Homes) { h.Type = "" }), "homes.type: missing"},
		{nfs(func(h *Homes) { h.Type = "smb" }), `homes.type: "smb": expected nfs or cifs`},
		{nfs(func(h *Homes) { h.Server = "" }), "homes.server: missing"},
		{nfs(func(h *Homes) { h.Server = "nfs://files.uni.example/export" }), "homes.server: \"nfs://files.uni.example/export\": give the host, not a URL"},
		{nfs(func(h *Homes) { h.Server = "files:2049" }), "homes.server: \"files:2049\": give the host without a port"},
		{nfs(func(h *Homes) { h.Server = "files uni" }), "homes.server: invalid host"},
		{nfs(func(h *Homes) { h.Server = "files\nevil" }), "homes.server: invalid host"},
		{nfs(func(h *Homes) { h.Path = "" }), "homes.path: missing (e.g. /export/homes/%(USER))"},
		{nfs(func(h *Homes) { h.Path = "/export/homes" }), "homes.path: \"/export/homes\" lacks %(USER)"},
		{nfs(func(h *Homes) { h.Path = "/export/my homes/%(USER)" }), "homes.path: \"/export/my homes/%(USER)\": only letters"},
		{nfs(func(h *Homes) { h.Path = `/export/%(USER)" mountpoint="/etc` }), "homes.path:"},
		{nfs(func(h *Homes) { h.Path = "/export/<x>/%(USER)" }), "homes.path:"},
		{nfs(func(h *Homes) { h.Path = "/export/a&b/%(USER)" }), "homes.path:"},
		{nfs(func(h *Homes) { h.Path = "/export/%(GROUP)/%(USER)" }), "homes.path:"},
		{nfs(func(h *Homes) { h.Path = "/export/%(USER)\n" }), "homes.path:"},
		{nfs(func(h *Homes) { h.Path = "export/%(USER)" }), "an NFS export path starts with /"},
		{nfs(func(h *Homes) { h.Path = "/export/../etc/%(USER)" }), "no .. components"},
		{Homes{Type: HomesCIFS, Server: "files", Path: "/homes/%(USER)"}, "share/directory without a leading /"},
		{Homes{Type: HomesCIFS, Server: "files", Path: "homes"}, "homes.path: \"homes\" lacks %(USER), where the user's name goes (e.g. homes/%(USER))"},
		{nfs(func(h *Homes) { h.Options = "vers=4.2 sec=sys" }), "homes.options: invalid option \"vers=4.2 sec=sys\""},
		{nfs(func(h *Homes) { h.Options = "vers=4.2,,sec=sys" }), "homes.options: invalid option \"\""},
		{nfs(func(h *Homes) { h.Options = "Vers=4" }), "homes.options: invalid option"},
		{nfs(func(h *Homes) { h.Options = `vers="4` }), "homes.options: invalid option"},
		{nfs(func(h *Homes) { h.Options = "suid" }), "homes.options: \"suid\" is not allowed: nosuid is always set"},
		{nfs(func(h *Homes) { h.Options = "rw,dev" }), "nodev is always set"},
		{Homes{Type: HomesCIFS, Server: "files", Path: "h/%(USER)", Options: "password=secret"}, "homes.options: \"password=secret\" is not allowed"},
		{Homes{Type: HomesCIFS, Server: "files", Path: "h/%(USER)", Options: "username=root"}, "pam_mount sets the user"},
		{nfs(func(h *Homes) { h.Options = strings.Repeat("a,", 130) + "a" }), "longer than 255"},
	} {
		err := tc.h.Validate("homes")
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.h, err, tc.want)
		}
	}
	site := &Site{Homes: &Homes{Type: HomesNFS, Server: "files"}, Pools: []Pool{{Name: "a"}, {Name: "b", Homes: &Homes{Type: HomesCIFS, Server: "room-b"}}}}
	if site.HomesFor("a").Server != "files" || site.HomesFor("b").Server != "room-b" || (&Site{}).HomesFor("a") != nil {
		t.Error("HomesFor: want the pool's own, else the site's, else none")
	}
	c := site.Clone()
	c.Pools[1].Homes.Server = "changed"
	c.Homes.Path = "changed"
	if site.Pools[1].Homes.Server != "room-b" || site.Homes.Path != "" {
		t.Error("Clone shares the homes configurations")
	}
	if ch := Diff(site, c); len(ch) != 2 {
		t.Errorf("Diff %+v, want the site's and pool b's homes", ch)
	}
}
