package ldapstore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
)

func TestPolicyCodec(t *testing.T) {
	p := model.Policy{Actions: map[model.OwnerState]model.GuestAction{model.StateOwnerActive: model.ActionFreeze}, IdleAfter: model.Duration(90 * time.Second), FreezePressure: 12.5, ThawPressure: 2}
	s, err := marshalPolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	if s != `{"actions":{"owner-active":"freeze"},"idleAfter":"1m30s","freezePressure":12.5,"thawPressure":2}` {
		t.Fatalf("encoding: %s", s)
	}
	back, err := unmarshalPolicy(s)
	if err != nil || !reflect.DeepEqual(back, p) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	for in, msg := range map[string]string{
		`{"idleAftr":"5m"}`:                     `unknown field "idleAftr"`,
		`{"idleAfter":300}`:                     "cannot unmarshal number",
		`{"idleAfter":"5 minutes"}`:             "invalid duration",
		`{"throttleCPU":500}`:                   "throttleCPU 500 out of range",
		`{"actions":{"owner-active":"sleep"}}`:  `unknown action "sleep"`,
		`{} {}`:                                 "trailing data",
		`[1,2]`:                                 "cannot unmarshal array",
		`{"actions":{"no-user":"run"}, "x": 1}`: `unknown field "x"`,
	} {
		if _, err := unmarshalPolicy(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("unmarshalPolicy(%s): %v, want %q", in, err, msg)
		}
	}
}

func TestGuestCodec(t *testing.T) {
	g := model.Guest{Image: "compute", Version: "1", Network: model.NetNAT, Ports: []string{"6818:6818"}}
	s, err := marshalGuest(g)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := unmarshalGuest(s); err != nil || !reflect.DeepEqual(back, g) {
		t.Fatalf("round trip %s: %+v %v", s, back, err)
	}
	for in, msg := range map[string]string{
		`{"image":"compute","vcpu":2}`:   `unknown field "vcpu"`,
		`{"image":"compute","vcpus":-2}`: "vcpus -2 out of range",
		`{"image":""}`:                   "invalid image name",
		`{"image":"c"}{}`:                "trailing data",
	} {
		if _, err := unmarshalGuest(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("unmarshalGuest(%s): %v, want %q", in, err, msg)
		}
	}
}
