package model

import (
	"reflect"
	"strings"
	"testing"
)

func TestGuestJobUsersAndStorage(t *testing.T) {
	users := func(uids, gids string) *GuestJobUsers {
		return &GuestJobUsers{UIDs: strings.Split(uids, " "), GIDs: strings.Split(gids, " ")}
	}
	home := GuestStorage{Server: "nfs.example.org", Export: "/export/home", Path: "/home"}
	scratch := GuestStorage{Server: "10.31.0.1", Export: "/scratch", Path: "/scratch"}
	for _, tc := range []struct {
		name string
		g    Guest
		msg  string
	}{
		{"an AD site's users", Guest{Image: "c", Backend: BackendContainer, JobUsers: users("1000000-1999999", "2000000-2999999"), Storage: []GuestStorage{home, scratch}}, ""},
		{"one id", Guest{Image: "c", JobUsers: users("1234567", "1234567")}, ""},
		{"only uids", Guest{Image: "c", JobUsers: &GuestJobUsers{UIDs: []string{"1000000-1999999"}}}, "guest: jobUsers: give both uids and gids"},
		{"desktop's local users", Guest{Image: "c", JobUsers: users("1000-60000", "70000")}, "guest: jobUsers: uids range 1000-60000 overlaps the desktop's own ids 0-65535"},
		{"a gid of 100", Guest{Image: "c", JobUsers: users("70000", "100")}, "guest: jobUsers: gids range 100 overlaps the desktop's own ids 0-65535"},
		{"the guest's own block", Guest{Image: "c", JobUsers: users("1879000000-1879100000", "70000")}, "guest: jobUsers: uids range 1879000000-1879100000 overlaps 1878982656-1879048191, the desktop's ids of the guest's own accounts"},
		{"a range up to the top", Guest{Image: "c", JobUsers: users("2147483648-4294967294", "70000")}, ""},
		{"two overlapping", Guest{Image: "c", JobUsers: users("100000-200000 150000-250000", "70000")}, "guest: jobUsers: uids ranges 100000-200000 and 150000-250000 overlap"},
		{"reversed", Guest{Image: "c", JobUsers: users("200000-100000", "70000")}, `guest: jobUsers: uids: invalid id range "200000-100000": 200000 comes after 100000`},
		{"(uid_t)-1", Guest{Image: "c", JobUsers: users("70000-4294967295", "70000")}, "guest: jobUsers: uids: invalid id range \"70000-4294967295\": 4294967295 is no id"},
		{"not a number", Guest{Image: "c", JobUsers: users("1e6", "70000")}, `guest: jobUsers: uids: invalid id range "1e6"`},
		{"signed", Guest{Image: "c", JobUsers: users("+70000", "70000")}, `guest: jobUsers: uids: invalid id range "+70000"`},
		{"storage in a QEMU guest (its kernel mounts it)", Guest{Image: "c", Backend: BackendQEMU, Storage: []GuestStorage{home}}, ""},
		{"storage in a VMware guest", Guest{Image: "c", Backend: BackendVMware, Storage: []GuestStorage{home}}, "guest: storage needs the container, qemu or xen backend"},
		{"storage over /etc", Guest{Image: "c", Storage: []GuestStorage{{Server: "nfs", Export: "/x", Path: "/etc/slurm"}}}, "guest: storage 1: mount path /etc/slurm would cover the guest's own /etc"},
		{"storage over /", Guest{Image: "c", Storage: []GuestStorage{{Server: "nfs", Export: "/x", Path: "/"}}}, `guest: storage 1: invalid mount path "/"`},
		{"storage above /var/spool", Guest{Image: "c", Storage: []GuestStorage{{Server: "nfs", Export: "/x", Path: "/var"}}}, "guest: storage 1: mount path /var would cover the guest's own /var/lib"},
		{"storage path not clean", Guest{Image: "c", Storage: []GuestStorage{{Server: "nfs", Export: "/x", Path: "/home/"}}}, `guest: storage 1: invalid mount path "/home/"`},
		{"storage path with a space", Guest{Image: "c", Storage: []GuestStorage{{Server: "nfs", Export: "/x", Path: "/my home"}}}, `guest: storage 1: invalid mount path "/my home"`},
		{"storage server with options", Guest{Image: "c", Storage: []GuestStorage{{Server: "nfs,vers=2", Export: "/x", Path: "/home"}}}, `guest: storage 1: invalid NFS server "nfs,vers=2"`},
		{"storage export with a comma", Guest{Image: "c", Storage: []GuestStorage{{Server: "nfs", Export: "/x,nosuid", Path: "/home"}}}, `guest: storage 1: invalid export "/x,nosuid"`},
		{"nested storage", Guest{Image: "c", Storage: []GuestStorage{home, {Server: "nfs", Export: "/s", Path: "/home/scratch"}}}, "guest: storage 2: mount path /home/scratch nests with /home"},
		{"same path twice", Guest{Image: "c", Storage: []GuestStorage{home, home}}, "guest: storage 2: mount path /home nests with /home"},
	} {
		err := tc.g.Validate()
		want := tc.msg
		if (want == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, want)
		}
	}
	got, err := JobIDRanges("uids", []string{"3000000-3999999", "70000", "1000000-1999999"})
	if want := []IDRange{{70000, 70000}, {1000000, 1999999}, {3000000, 3999999}}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("JobIDRanges sorted: %v, %v", got, err)
	}
	g := &Guest{Image: "c", JobUsers: users("70000", "70000"), Storage: []GuestStorage{home}}
	c := g.Clone()
	c.JobUsers.UIDs[0], c.Storage[0].Path = "80000", "/x"
	if g.JobUsers.UIDs[0] != "70000" || g.Storage[0].Path != "/home" {
		t.Errorf("Clone shares JobUsers or Storage: %+v", g)
	}
}
