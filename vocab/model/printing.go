package model

import (
	"regexp"
	"strings"
)

// Printing is where the desktops of a site, or of one pool where it differs, print: the
// CUPS (IPP) server whose queues the PCs use directly, so that no print service runs on a
// PC and a job left behind cannot outlive its reboot (docs/desktop.md "Printing"). The
// site manager renders it into the PC's /etc/cups/client.conf and lpoptions.
type Printing struct {
	// Server is the CUPS server, host or host:port (IPP, default port 631).
	Server string `json:"server" yaml:"server"`
	// DefaultPrinter is the queue jobs go to unless the user picks another; empty: the
	// server's default.
	DefaultPrinter string `json:"defaultPrinter,omitempty" yaml:"defaultPrinter,omitempty"`
}

// queueRE: a CUPS queue name as sites name them. CUPS itself refuses only space, tab, '/'
// and '#'; the narrower alphabet keeps the name one inert word in lpoptions.
var queueRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,126}$`)

// Clone copies the printing configuration (nil stays nil).
func (p *Printing) Clone() *Printing {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// SamePrinting compares two (possibly nil) printing configurations.
func SamePrinting(a, b *Printing) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// PrintingFor is the printing configuration of a pool's desktops: the pool's own, else
// the site's; nil when neither has one.
func (s *Site) PrintingFor(pool string) *Printing {
	if p := s.Pool(pool); p != nil && p.Printing != nil {
		return p.Printing
	}
	return s.Printing
}

// Validate checks a printing configuration; what names it in messages.
func (p *Printing) Validate(what string) error {
	if p.Server == "" {
		return invalid("%s.server: missing (the CUPS server, e.g. print.uni.example or print.uni.example:631)", what)
	}
	if strings.Contains(p.Server, "://") {
		return invalid("%s.server: %q: give the host (and :port), not a URL", what, p.Server)
	}
	if err := validHostPort(p.Server); err != nil {
		return invalid("%s.server: %v", what, err)
	}
	if p.DefaultPrinter != "" && !queueRE.MatchString(p.DefaultPrinter) {
		return invalid("%s.defaultPrinter: invalid queue name %q: letters, digits, '_', '.' and '-'", what, p.DefaultPrinter)
	}
	return nil
}
