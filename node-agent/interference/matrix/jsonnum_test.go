package matrix

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestRunPairedInfinite: a pair whose running segment saw no desktop progress has an
// infinite slowdown; the run is still written (null) and read back (NaN), instead of
// failing the whole report ("json: unsupported value: +Inf", seen in make demo on a busy
// host).
func TestRunPairedInfinite(t *testing.T) {
	r := Run{Round: 2, Phase: "both", Paired: []float64{0.25, math.Inf(1), math.NaN()}, GuestWork: 3}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"paired":[0.25,null,null]`) || !strings.Contains(string(b), `"round":2`) ||
		!strings.Contains(string(b), `"guestWork":3`) {
		t.Fatalf("marshalled %s", b)
	}
	var back Run
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Round != 2 || back.GuestWork != 3 || len(back.Paired) != 3 || back.Paired[0] != 0.25 ||
		!math.IsNaN(back.Paired[1]) || !math.IsNaN(back.Paired[2]) {
		t.Fatalf("read back %+v", back)
	}
	// Without pairs, nothing changes: no "paired" key.
	if b, err := json.Marshal(Run{Phase: "desktop-alone"}); err != nil || strings.Contains(string(b), "paired") {
		t.Fatalf("%s %v", b, err)
	}
}
