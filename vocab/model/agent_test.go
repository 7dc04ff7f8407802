package model

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPolicyValidate(t *testing.T) {
	no := false
	for _, tc := range []struct {
		name string
		p    Policy
		msg  string // "" = valid
	}{
		{"empty (all defaults)", Policy{}, ""},
		{"default policy", DefaultPolicy(), ""},
		{"partial", Policy{Actions: map[OwnerState]GuestAction{StateOwnerActive: ActionFreeze}, IdleAfter: Duration(10 * time.Minute), RemoteActive: &no}, ""},
		{"hold zero is allowed", Policy{Hold: 0}, ""},
		{"unknown owner state", Policy{Actions: map[OwnerState]GuestAction{"lunch": ActionRun}},
			`policy: unknown owner state "lunch" (one of no-user, owner-idle, owner-active, after-hours, maintenance)`},
		{"unknown action", Policy{Actions: map[OwnerState]GuestAction{StateNoUser: "sprint"}},
			`policy: unknown action "sprint" for no-user (one of run, throttle, freeze, evict)`},
		{"idleAfter below a second", Policy{IdleAfter: Duration(500 * time.Millisecond)}, "policy: idleAfter 500ms out of range (1s to 168h)"},
		{"evictAfter above a week", Policy{EvictAfter: Duration(200 * time.Hour)}, "policy: evictAfter 200h0m0s out of range (1s to 168h)"},
		{"negative hold", Policy{Hold: Duration(-time.Second)}, "policy: hold -1s out of range (0s to 168h)"},
		{"throttleCPU above 100", Policy{ThrottleCPU: 101}, "policy: throttleCPU 101 out of range (1-100 percent)"},
		{"negative throttleCPU", Policy{ThrottleCPU: -5}, "policy: throttleCPU -5 out of range"},
		{"guestMemory above 100", Policy{GuestMemory: 150}, "policy: guestMemory 150 out of range (1-100 percent)"},
		{"negative desktop memory", Policy{DesktopMemoryMB: -1}, "policy: desktopMemoryMB -1 out of range"},
		{"freezePressure NaN", Policy{FreezePressure: math.NaN()}, "policy: freezePressure NaN out of range (0-100 percent)"},
		{"thawPressure negative", Policy{ThawPressure: -1}, "policy: thawPressure -1 out of range"},
		{"desktopLoad infinite", Policy{DesktopLoad: math.Inf(1)}, "policy: desktopLoad +Inf out of range"},
		{"thaw above the default freeze", Policy{ThawPressure: 30}, "policy: thawPressure 30 must be below freezePressure 20 (hysteresis)"},
		{"thaw equal to freeze", Policy{FreezePressure: 10, ThawPressure: 10}, "policy: thawPressure 10 must be below freezePressure 10"},
		{"switch rules", Policy{Switch: map[string]SwitchRule{"exam": SwitchForce, "cluster": SwitchWait}, SwitchGrace: Duration(time.Minute)}, ""},
		{"switch for an unknown kind", Policy{Switch: map[string]SwitchRule{"party": SwitchForce}}, `policy: switch: unknown kind "party"`},
		{"unknown switch rule", Policy{Switch: map[string]SwitchRule{"exam": "ask"}}, `policy: switch: unknown rule "ask" for exam (one of force, wait)`},
		{"negative spread", Policy{SwitchSpread: Duration(-time.Second)}, "policy: switchSpread -1s out of range"},
		{"power off after seconds", Policy{PowerOffIdle: Duration(10 * time.Second)}, "policy: powerOffIdle 10s out of range (1m0s to 168h)"},
		{"log out after a minute", Policy{LogoutIdle: Duration(time.Minute)}, "policy: logoutIdle 1m0s out of range (2m0s to 168h)"},
	} {
		err := tc.p.Validate()
		switch {
		case tc.msg == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.msg != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.msg)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.msg)
		case err != nil:
			if _, ok := err.(*InvalidError); !ok {
				t.Errorf("%s: %T is not an InvalidError", tc.name, err)
			}
		}
	}
}

func TestPolicyEffective(t *testing.T) {
	if e, d := (Policy{}).Effective(), DefaultPolicy(); !reflect.DeepEqual(e, d) {
		t.Fatalf("empty policy's effective policy is not the default:\n%+v\n%+v", e, d)
	}
	no := false
	p := Policy{Actions: map[OwnerState]GuestAction{StateOwnerActive: ActionFreeze}, ThrottleCPU: 50, RemoteActive: &no}
	e := p.Effective()
	if e.Actions[StateOwnerActive] != ActionFreeze || e.Actions[StateNoUser] != ActionRun || e.ThrottleCPU != 50 ||
		*e.RemoteActive || e.IdleAfter != Duration(5*time.Minute) {
		t.Fatalf("effective = %+v", e)
	}
	if len(e.Actions) != len(OwnerStates) {
		t.Fatalf("effective policy has %d actions, want one per state", len(e.Actions))
	}
	// Effective does not alias the input.
	e.Actions[StateNoUser] = ActionEvict
	*e.RemoteActive = true
	if p.Actions[StateNoUser] != "" || *p.RemoteActive {
		t.Fatal("Effective shares state with its receiver")
	}
}

func TestPolicySwitchFor(t *testing.T) {
	p := Policy{Switch: map[string]SwitchRule{"cluster": SwitchForce, "holiday": SwitchWait}}.Effective()
	for _, tc := range []struct {
		mode ModeKind
		exc  ExceptionKind
		want SwitchRule
	}{
		{KindCourseVM, "", SwitchForce},       // default
		{KindCluster, "", SwitchForce},        // the pool's own rule
		{KindDesktop, "exam", SwitchForce},    // the exception's kind decides first
		{KindCourseVM, "holiday", SwitchWait}, // also against the mode's
		{KindDesktop, "other", SwitchWait},    // no rule for "other": the mode's
	} {
		if got := p.SwitchFor(tc.mode, tc.exc); got != tc.want {
			t.Errorf("SwitchFor(%s, %q) = %s, want %s", tc.mode, tc.exc, got, tc.want)
		}
	}
}

func TestGuestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    Guest
		msg  string
	}{
		{"minimal", Guest{Image: "compute"}, ""},
		{"nat with ports", Guest{Image: "compute", Network: NetNAT, Ports: []string{"6818:6818", "2222:22"}}, ""},
		{"no image", Guest{}, `guest: invalid image name ""`},
		{"image with LDAP metacharacters", Guest{Image: "x*)(cn=*"}, "guest: invalid image name"},
		{"unknown backend", Guest{Image: "c", Backend: "bhyve"}, `guest: unknown backend "bhyve" (one of qemu, xen, vmware, container)`},
		{"unknown network", Guest{Image: "c", Network: "wifi"}, `guest: unknown network "wifi"`},
		{"ports without nat", Guest{Image: "c", Ports: []string{"1:1"}}, "guest: port forwards need network nat"},
		{"bad port", Guest{Image: "c", Network: NetNAT, Ports: []string{"70000:22"}}, "guest: port 70000 out of range"},
		{"port syntax", Guest{Image: "c", Network: NetNAT, Ports: []string{"ssh"}}, `guest: invalid port forward "ssh"`},
		{"bridge name", Guest{Image: "c", Bridge: "br0; rm -rf /"}, "guest: invalid bridge name"},
		{"vcpus", Guest{Image: "c", VCPUs: -1}, "guest: vcpus -1 out of range"},
		{"kernel args", Guest{Image: "c", KernelArgs: "quiet\ninit=/bin/sh"}, "guest: invalid kernel argument"},
	} {
		err := tc.g.Validate()
		if (tc.msg == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), tc.msg)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.msg)
		}
	}
	if d := (Guest{Image: "c"}).WithDefaults(); d.Backend != BackendQEMU || d.Network != NetBridged || d.Bridge != "br0" {
		t.Fatalf("defaults: %+v", d)
	}
}

// agentSite is fullSite with a compute image, a guest on the desktop and cluster modes
// and a policy on lab-a.
func agentSite() *Site {
	s := fullSite()
	s.Images = append(s.Images, Image{Name: "compute", Kind: ImageCompute, Versions: []ImageVersion{
		{Version: "1", SHA256: sha('d'), Path: "compute/1", Created: t0},
		{Version: "2", SHA256: sha('e'), Path: "compute/2", Created: t0.Add(time.Hour)},
	}})
	s.Mode("desktop").Guest = &Guest{Image: "compute"}
	s.Mode("cluster").Guest = &Guest{Image: "compute", Version: "1", Network: NetNAT, Ports: []string{"6818:6818"}}
	s.Pool("lab-a").Policy = &Policy{Actions: map[OwnerState]GuestAction{StateOwnerActive: ActionFreeze}, ThrottleCPU: 40}
	s.Sort()
	return s
}

func TestSiteValidateAgentFields(t *testing.T) {
	if err := agentSite().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		mod  func(s *Site)
		msg  string
	}{
		{"guest on a local-disk mode", func(s *Site) { s.Mode("local").Guest = &Guest{Image: "compute"} },
			"mode local: only desktop and cluster modes run a compute guest, not a local-disk mode"},
		{"guest on a course-vm mode", func(s *Site) { s.Mode("course").Guest = &Guest{Image: "compute"} },
			"mode course: only desktop and cluster modes run a compute guest, not a course-vm mode"},
		{"unknown guest image", func(s *Site) { s.Mode("desktop").Guest.Image = "nope" }, `mode desktop: guest: unknown image "nope"`},
		{"desktop image as guest", func(s *Site) { s.Mode("desktop").Guest.Image = "desk" },
			"mode desktop: guest: image desk is a desktop image, not a compute (or course-vm) image"},
		{"pinned version missing", func(s *Site) { s.Mode("cluster").Guest.Version = "9" }, `mode cluster: guest: image compute has no version "9"`},
		{"invalid guest field", func(s *Site) { s.Mode("desktop").Guest.Backend = "bhyve" }, `mode desktop: guest: unknown backend "bhyve" (one of qemu, xen, vmware, container)`},
		{"invalid pool policy", func(s *Site) { s.Pool("lab-a").Policy.ThawPressure = 50 },
			"pool lab-a: policy: thawPressure 50 must be below freezePressure 20 (hysteresis)"},
		{"course-vm image as guest is fine", func(s *Site) { s.Mode("desktop").Guest.Image = "vm" }, ""},
	} {
		s := agentSite()
		tc.mod(s)
		err := s.Validate()
		if (tc.msg == "") != (err == nil) || (err != nil && err.Error() != tc.msg) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.msg)
		}
	}
}

func TestCloneCopiesAgentFields(t *testing.T) {
	s := agentSite()
	c := s.Clone()
	c.Pool("lab-a").Policy.Actions[StateNoUser] = ActionEvict
	c.Pool("lab-a").Policy.ThrottleCPU = 1
	c.Mode("cluster").Guest.Ports[0] = "1:1"
	c.Mode("desktop").Guest.Version = "1"
	if !reflect.DeepEqual(s, agentSite()) {
		t.Fatal("editing a clone changed the original")
	}
}

func TestDiffAgentFields(t *testing.T) {
	cur := agentSite()
	next := cur.Clone()
	next.Pool("lab-a").Policy.Actions[StateOwnerActive] = ActionEvict
	next.Mode("desktop").Guest.Version = "2"
	next.Mode("cluster").Guest = nil
	if got := strs(Diff(cur, next)); !slices.Equal(got, []string{"~ mode cluster (guest)", "~ mode desktop (guest)", "~ pool lab-a (policy)"}) {
		t.Fatalf("%q", got)
	}
	// nil and an empty policy both mean the default: no change.
	a, b := cur.Clone(), cur.Clone()
	a.Pool("lab-b").Policy, b.Pool("lab-b").Policy = nil, &Policy{Actions: map[OwnerState]GuestAction{}}
	if d := Diff(a, b); len(d) != 0 {
		t.Fatalf("nil vs empty policy: %v", d)
	}
	// Sort makes them equal in memory too.
	b.Sort()
	if b.Pool("lab-b").Policy != nil {
		t.Fatal("Sort kept an empty policy")
	}
	// Building and tearing down a site with guests keeps the guest image references valid
	// at every step: images and versions before the modes that run them, after on delete.
	state, _ := replay(t, &Site{Name: "uni", Timezone: "Europe/Berlin"}, agentSite(), true)
	if !reflect.DeepEqual(normalize(state), normalize(agentSite())) {
		t.Fatal("replay does not reach the site")
	}
	replay(t, agentSite(), minimalSite(), true)
	// Moving the guest to a new image: the image comes first, the old one goes last.
	next = agentSite()
	next.Images = append(next.Images, Image{Name: "compute2", Kind: ImageCompute, Versions: []ImageVersion{{Version: "1", SHA256: sha('f'), Path: "compute2/1", Created: t0}}})
	next.Mode("desktop").Guest.Image = "compute2"
	next.Mode("cluster").Guest = &Guest{Image: "compute2", Version: "1"}
	next.Images = slices.DeleteFunc(next.Images, func(im Image) bool { return im.Name == "compute" })
	next.Sort()
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	replay(t, agentSite(), next, true)
}

// Every field of Policy and Guest takes part in comparisons (Diff) and in IsZero: when a
// field is added, this fails until it does, instead of a change going unnoticed.
func TestAgentFieldComparisonsSeeEveryField(t *testing.T) {
	set := func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Map:
			v.Set(reflect.MakeMap(v.Type()))
			v.SetMapIndex(reflect.ValueOf("x").Convert(v.Type().Key()), reflect.ValueOf("x").Convert(v.Type().Elem()))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		case reflect.Slice:
			e := reflect.New(v.Type().Elem()).Elem()
			if e.Kind() == reflect.String {
				e.SetString("1:1")
			} else {
				e.Field(0).SetString("x") // a struct: its first field
			}
			v.Set(reflect.Append(reflect.MakeSlice(v.Type(), 0, 1), e))
		case reflect.String:
			v.SetString("x")
		case reflect.Int, reflect.Int64:
			v.SetInt(3)
		case reflect.Float64:
			v.SetFloat(3)
		case reflect.Bool:
			v.SetBool(true)
		default:
			t.Fatalf("field kind %s: teach this test", v.Kind())
		}
	}
	pt := reflect.TypeOf(Policy{})
	for i := 0; i < pt.NumField(); i++ {
		var p Policy
		set(reflect.ValueOf(&p).Elem().Field(i))
		if p.IsZero() || SamePolicy(&p, nil) || SamePolicy(&Policy{}, &p) {
			t.Errorf("Policy.%s is not compared", pt.Field(i).Name)
		}
		if c := p.Clone(); !SamePolicy(c, &p) {
			t.Errorf("Policy.%s: a clone differs", pt.Field(i).Name)
		}
	}
	gt := reflect.TypeOf(Guest{})
	for i := 0; i < gt.NumField(); i++ {
		var g Guest
		set(reflect.ValueOf(&g).Elem().Field(i))
		if SameGuest(&g, &Guest{}) || SameGuest(&g, nil) {
			t.Errorf("Guest.%s is not compared", gt.Field(i).Name)
		}
	}
	if !SameGuest(&Guest{Image: "c", Ports: []string{}}, &Guest{Image: "c"}) || !SameGuest(nil, nil) {
		t.Error("empty ports differ from none")
	}
}
