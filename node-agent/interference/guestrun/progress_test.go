package guestrun

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestProgress: progress lines among console noise set the value; the rest is kept as
// the guest's output for error messages; waitFirst returns at the first line, or says why
// it gave up.
func TestProgress(t *testing.T) {
	p := newProgress()
	if _, err := p.value(); err == nil {
		t.Error("value before any line: no error")
	}
	exited := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := p.waitFirst(ctx, exited, "the guest"); err == nil {
		t.Error("waitFirst without a line: no error")
	}
	p.feed(strings.NewReader("[    0.5] Run /init as init process\r\noverter\novertime-work 0 flop\r\n" +
		"overtime-work 1e+06 flop\novertime-work garbled\nqemu: warning\n"))
	if err := p.waitFirst(context.Background(), exited, "the guest"); err != nil {
		t.Fatal(err)
	}
	if w, err := p.value(); err != nil || w != 1e6 {
		t.Errorf("value %g %v, want 1e6", w, err)
	}
	if out := p.output(); !strings.Contains(out, "qemu: warning") || strings.Contains(out, "overtime-work 1e+06") {
		t.Errorf("output %q: want the non-progress lines only", out)
	}
	q := newProgress()
	close(exited)
	q.line("panic: something")
	if err := q.waitFirst(context.Background(), exited, "the guest"); err == nil || !strings.Contains(err.Error(), "panic: something") {
		t.Errorf("waitFirst after the guest ended: %v, want an error with its output", err)
	}
}
