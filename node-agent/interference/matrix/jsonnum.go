package matrix

import (
	"encoding/json"
	"math"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// finite is v, or nil (JSON null) for NaN and infinities, which encoding/json rejects.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func orNaN(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

type estimateJSON struct {
	Slowdown *float64 `json:"slowdown"`
	Low      *float64 `json:"low"`
	High     *float64 `json:"high"`
	Method   string   `json:"method"`
}

// MarshalJSON writes NaN as null.
func (e Estimate) MarshalJSON() ([]byte, error) {
	return json.Marshal(estimateJSON{finite(e.Slowdown), finite(e.Low), finite(e.High), e.Method})
}

// UnmarshalJSON reads null as NaN.
func (e *Estimate) UnmarshalJSON(b []byte) error {
	var j estimateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = Estimate{orNaN(j.Slowdown), orNaN(j.Low), orNaN(j.High), j.Method}
	return nil
}

type capJSON struct {
	T        float64  `json:"t"`
	Cap      *float64 `json:"cap"`
	Slowdown *float64 `json:"slowdown"`
}

// MarshalJSON writes NaN as null.
func (c CapPoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(capJSON{c.T, finite(c.Cap), finite(c.Slowdown)})
}

// UnmarshalJSON reads null as NaN.
func (c *CapPoint) UnmarshalJSON(b []byte) error {
	var j capJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*c = CapPoint{j.T, orNaN(j.Cap), orNaN(j.Slowdown)}
	return nil
}

// cleanWindow replaces non-finite signals by 0 (not measured).
func cleanWindow(w interference.Window) interference.Window {
	for _, p := range []*float64{&w.Seconds, &w.DesktopCPUSeconds, &w.DesktopWaitSeconds, &w.CanaryRatio,
		&w.GuestCPUSeconds, &w.GuestStealSeconds, &w.OwnerActiveSeconds} {
		if math.IsNaN(*p) || math.IsInf(*p, 0) {
			*p = 0
		}
	}
	return w
}

// F is a float64 that JSON writes as null when it is NaN or infinite (and reads back as
// NaN).
type F float64

// MarshalJSON writes NaN as null.
func (f F) MarshalJSON() ([]byte, error) { return json.Marshal(finite(float64(f))) }

// UnmarshalJSON reads null as NaN.
func (f *F) UnmarshalJSON(b []byte) error {
	var p *float64
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*f = F(orNaN(p))
	return nil
}

// runJSON is Run with its pairs' slowdowns as nullable numbers: a pair whose running
// segment saw no progress of the desktop (a host busy with others' work) has an infinite
// slowdown, which encoding/json rejects; it is written as null (read back as NaN).
type runJSON struct {
	runPlain
	Paired []*float64 `json:"paired,omitempty"`
}

// runPlain is Run without its methods (no recursion into MarshalJSON).
type runPlain Run

// MarshalJSON writes a pair's infinite or NaN slowdown as null.
func (r Run) MarshalJSON() ([]byte, error) {
	j := runJSON{runPlain: runPlain(r)}
	for _, v := range r.Paired {
		j.Paired = append(j.Paired, finite(v))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads null as NaN.
func (r *Run) UnmarshalJSON(b []byte) error {
	var j runJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = Run(j.runPlain)
	r.Paired = nil
	for _, p := range j.Paired {
		r.Paired = append(r.Paired, orNaN(p))
	}
	return nil
}
