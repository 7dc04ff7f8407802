package main

import (
	"slices"
	"testing"
	"time"
)

// Power-on times: all at once without a spread; evenly spaced over it with seed 0 (the
// storms' -spread); with a seed, uniform random in [0, spread), the same for the same seed.
func TestStartDelays(t *testing.T) {
	if d := startDelays(0, 7, 200); slices.ContainsFunc(d, func(x time.Duration) bool { return x != 0 }) {
		t.Fatal("no spread, but delays")
	}
	even := startDelays(3*time.Second, 0, 4)
	s := slices.Clone(even)
	slices.Sort(s)
	if want := []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second}; !slices.Equal(s, want) {
		t.Fatalf("even spread %v, want %v in some order", even, want)
	}
	const spread = 2 * time.Minute
	a, b := startDelays(spread, 1, 200), startDelays(spread, 1, 200)
	if !slices.Equal(a, b) || slices.Equal(a, startDelays(spread, 2, 200)) {
		t.Fatal("random spread: not reproducible per seed, or the same for another seed")
	}
	var first, second int
	for _, d := range a {
		if d < 0 || d >= spread {
			t.Fatalf("delay %v outside [0, %v)", d, spread)
		}
		if d < spread/2 {
			first++
		} else {
			second++
		}
	}
	if first < 70 || second < 70 { // 200 uniform draws: each half holds 100 ± 3 sigma
		t.Fatalf("%d and %d of 200 in the two halves of the window: not uniform", first, second)
	}
}

// Both variants in every repetition, alternating which goes first; only the spread one
// spreads, with a fresh draw per repetition; both fetch the boot script.
func TestSwitchSpecs(t *testing.T) {
	r1, r2 := switchSpecs(200, 1, 120), switchSpecs(200, 2, 120)
	if r1[0].Kind != kindSwitchAtOnce || r1[1].Kind != kindSwitchSpread || r2[0].Kind != kindSwitchSpread || r2[1].Kind != kindSwitchAtOnce {
		t.Fatalf("order %s,%s then %s,%s", r1[0].Kind, r1[1].Kind, r2[0].Kind, r2[1].Kind)
	}
	for _, s := range append(r1, r2...) {
		if !s.BootScript || s.N != 200 || s.Addressing != "static" {
			t.Fatalf("spec %+v", s)
		}
		if (s.Kind == kindSwitchSpread) != (s.Spread == 120 && s.StartSeed == uint64(s.Rep)) || (s.Kind == kindSwitchAtOnce && s.Spread != 0) {
			t.Fatalf("spec %+v", s)
		}
	}
}
