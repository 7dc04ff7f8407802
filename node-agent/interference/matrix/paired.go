package matrix

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/overtime-hpc/overtime/node-agent/interference"
)

// The paired measurement of throughput desktops (cpu, memory, fs).
//
// Separate desktop-alone and both runs, even interleaved, differ by more than the effect
// being measured on a noisy machine: on the 2-core VMs we measure on, two 2-second runs of
// the same CPU-bound process differ by up to 30 % (host load, frequency, page placement),
// while the targets are 1 % and 3 %. So a throughput desktop's both run is one desktop
// process whose guest alternates between frozen and running (under its policy) in short
// segments, in a random order within each pair; the desktop's rate in each segment comes
// from its own progress lines (`bench desktop-load --progress`), and each pair gives one
// slowdown = rate with the guest frozen / rate with it running − 1. Slow drift cancels
// within a pair. What it does not capture: a frozen guest still holds its memory (but no
// CPU, cache or memory bandwidth), and the desktop's caches are shared with a guest that
// ran a moment ago (a cache-warm-up cost after each thaw is part of the effect).
//
// The guest's work, the signals window and the wake-up probe are taken over the running
// segments only; the adaptive controller is paused while the guest is frozen, so that
// it only sees what the guest causes.

// DesktopStream is a desktop workload process reporting its progress.
type DesktopStream interface {
	// Progress is the last progress line: cumulative work and when it arrived (zero
	// before the first).
	Progress() (work float64, at time.Time)
	// Stop asks the process to end now (SIGTERM: it still reports its result).
	Stop()
	// Wait waits for the process and returns its result.
	Wait() (interference.Result, error)
}

// Pairing defaults.
const (
	DefaultPairs   = 6
	DefaultSegment = 300 * time.Millisecond
	// settle: after a freeze or thaw, the segment starts this much later (the freezer's
	// transition, the next progress line).
	settle = 60 * time.Millisecond
)

// paired reports whether p's both run is a paired one.
func (b *bench) paired(p Phase) bool {
	return p.Kind == PhaseBoth && KindOf(p.Desktop) == Throughput && b.deps.StartDesktop != nil && b.cfg.Pairs > 0
}

// pairedLength is how long the desktop process of a paired run must run.
func pairedLength(cfg Config) time.Duration {
	return time.Duration(cfg.Pairs)*2*(cfg.Segment+settle) + cfg.Warmup + cfg.AdaptiveWarmup + time.Second
}

func (b *bench) pairedBoth(ctx context.Context, p Phase, r *Run) (err error) {
	g, err := b.acquire(ctx, p.Backend, p.Guest)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.release(ctx, p.Backend, p.Guest, g)) }()
	c, err := b.applyPolicy(ctx, p.Policy, g, "paired runs freeze the guest")
	if err != nil {
		return err
	}
	// suspend keeps the guest frozen in both halves: an A/A comparison, the noise floor.
	toggle := p.Policy != "suspend"
	var sig Signals
	if b.deps.Signals != nil {
		if sig, err = b.deps.Signals(g); err != nil {
			return fmt.Errorf("signals: %w", err)
		}
		defer sig.Close()
	}
	var paused atomic.Bool
	var stopCtl func() []CapPoint
	if p.Policy == "adaptive" {
		stopCtl = b.adaptiveWith(ctx, c, sig, &paused)
		defer func() {
			if stopCtl != nil {
				r.CapTrace = stopCtl()
			}
		}()
	}
	ds, err := b.deps.StartDesktop(ctx, p.Desktop, pairedLength(b.cfg))
	if err != nil {
		return fmt.Errorf("desktop %s: %w", p.Desktop, err)
	}
	defer func() {
		ds.Stop()
		res, werr := ds.Wait()
		if werr != nil {
			err = errors.Join(err, fmt.Errorf("desktop %s: %w", p.Desktop, werr))
			return
		}
		r.setDesktop(res, r.probeLat)
		r.probeLat = nil
	}()
	// The desktop's warm-up: its arrays or caches, and (adaptive) the controller's first
	// ticks with the guest running.
	if err := waitProgress(ctx, ds, 10*time.Second); err != nil {
		return fmt.Errorf("desktop %s: %w", p.Desktop, err)
	}
	warm := b.cfg.Warmup
	if p.Policy == "adaptive" {
		warm += b.cfg.AdaptiveWarmup
	}
	if err := sleep(ctx, warm); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(b.cfg.Seed, uint64(r.Round)<<20|uint64(r.Seq)))
	var (
		windows   []interference.Window
		probeCPU  float64
		probeSecs float64
	)
	for i := 0; i < b.cfg.Pairs; i++ {
		order := [2]bool{false, true} // running?
		if rng.IntN(2) == 1 {
			order[0], order[1] = true, false
		}
		var rate [2]float64 // frozen, running
		for _, running := range order {
			if toggle {
				if running {
					if err := c.Thaw(ctx); err != nil {
						return err
					}
					paused.Store(false)
				} else {
					paused.Store(true)
					if err := c.Freeze(ctx); err != nil {
						return err
					}
				}
			}
			if err := sleep(ctx, settle); err != nil {
				return err
			}
			var (
				end      func() interference.Window
				gp0, gp1 float64
				gt0, gt1 time.Time
				pr       Probe
			)
			if running {
				if sig != nil {
					end = sig.Begin()
				}
				if gp0, gt0, err = progress(g); err != nil {
					return err
				}
				if b.deps.StartProbe != nil {
					if pr, err = b.deps.StartProbe(ctx); err != nil {
						return fmt.Errorf("probe: %w", err)
					}
				}
			}
			w0, t0 := ds.Progress()
			if err := sleep(ctx, b.cfg.Segment); err != nil {
				return err
			}
			w1, t1 := ds.Progress()
			if running {
				if pr != nil {
					pres := pr.Stop()
					r.probeLat = append(r.probeLat, pres.LatencyUs...)
					probeCPU += pres.CPUSeconds
					probeSecs += pres.Seconds
				}
				if gp1, gt1, err = progress(g); err != nil {
					return err
				}
				r.GuestWork += gp1 - gp0
				r.GuestSeconds += gt1.Sub(gt0).Seconds()
				if end != nil {
					windows = append(windows, end())
				}
			}
			if !t1.After(t0) {
				return fmt.Errorf("desktop %s: no progress within a %v segment", p.Desktop, b.cfg.Segment)
			}
			idx := 0
			if running {
				idx = 1
			}
			rate[idx] = (w1 - w0) / t1.Sub(t0).Seconds()
		}
		r.Paired = append(r.Paired, rate[0]/rate[1]-1)
	}
	if toggle {
		paused.Store(false)
		if err := c.Thaw(ctx); err != nil {
			return err
		}
	}
	if probeSecs > 0 {
		r.ProbeCPU = probeCPU / probeSecs
	}
	if len(windows) > 0 {
		w := sumWindows(windows)
		r.Window = ptr(cleanWindow(w))
		if b.deps.Estimate != nil {
			est := b.deps.Estimate(w)
			r.Estimate = &est
		}
	}
	return nil
}

// waitProgress waits for the desktop's first progress line.
func waitProgress(ctx context.Context, ds DesktopStream, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if _, at := ds.Progress(); !at.IsZero() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no progress line within %v", limit)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// sumWindows adds windows (the running segments of a paired run); the canary ratio is
// their time-weighted mean.
func sumWindows(ws []interference.Window) interference.Window {
	var s interference.Window
	var canaryT float64
	for _, w := range ws {
		s.Seconds += w.Seconds
		s.DesktopCPUSeconds += w.DesktopCPUSeconds
		s.DesktopWaitSeconds += w.DesktopWaitSeconds
		s.DesktopSlices += w.DesktopSlices
		s.GuestCPUSeconds += w.GuestCPUSeconds
		s.GuestStealSeconds += w.GuestStealSeconds
		s.OwnerActiveSeconds += w.OwnerActiveSeconds
		if w.CanaryRatio > 0 {
			s.CanaryRatio += w.CanaryRatio * w.Seconds
			canaryT += w.Seconds
		}
	}
	if canaryT > 0 {
		s.CanaryRatio /= canaryT
	}
	return s
}

// medianOf is the median of xs (NaN when empty).
func medianOf(xs []float64) float64 {
	s := sorted(xs)
	if len(s) == 0 {
		return math.NaN()
	}
	return quantileSorted(s, 0.5)
}
