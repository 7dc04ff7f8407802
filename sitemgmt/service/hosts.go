package service

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/overtime-hpc/overtime/sitemgmt/render"
	"github.com/overtime-hpc/overtime/sitemgmt/resolve"
	"github.com/overtime-hpc/overtime/sitemgmt/seatconf"
	"github.com/overtime-hpc/overtime/sitemgmt/sitefile"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// Hosts answers what a host gets: its boot answer and its agent's configuration; and it
// holds the host list's own writes (add, edit, remove, CSV import) that the front ends
// offer beside the generic entity CRUD.
type Hosts struct{ s *Service }

// FileCheck says why a mode's resolved image version cannot boot from this boot server
// ("" = it can), e.g. because its files are not on disk (the API's boot file store).
type FileCheck func(m *model.Mode, v *model.ImageVersion) string

// BootAnswer is what the PC with mac (canonical; "" for a request that names none, such as
// pxelinux.cfg/default) gets at q.At: the resolver's assignment (sitemgmt/resolve, with the
// versions the boot servers hold), less the entries whose files cannot boot here (files,
// nil: not checked), ready for a renderer (iPXE, PXELINUX). A host in the site has the
// versions it was given noted: what this PC may boot from now on stays on its boot server
// (image gc). Rendering options (render.Boot.Timeout) are the caller's.
func (hs *Hosts) BootAnswer(mac string, q resolve.Query, files FileCheck) render.Boot {
	s := hs.s
	q.Held = s.Images.Held()
	a := s.Snapshot().Resolver.MAC(mac, q)
	if a.Host != nil {
		var given []string
		if a.Image != nil && a.ImageUnavailable == "" {
			given = append(given, a.Mode.Image+"/"+a.Image.Version)
		}
		for _, e := range a.Others {
			if e.Image != nil {
				given = append(given, e.Mode.Image+"/"+e.Image.Version)
			}
		}
		s.Images.NoteBooted(a.Host.Name, false, given, q.At)
	}
	b := a.Boot()
	if files == nil {
		return b
	}
	if gate := b.Check; gate != nil {
		b.Check = func(m *model.Mode, v *model.ImageVersion) string {
			if why := gate(m, v); why != "" {
				return why
			}
			return files(m, v)
		}
	} else {
		b.Check = files
	}
	return b
}

// AgentRequest is the context of an agent configuration: when, for which boot server's
// instance, what the PC booted and who asks.
type AgentRequest struct {
	At time.Time
	// BootServer is the boot server this site manager instance speaks for
	// (resolve.Query.BootServer).
	BootServer string
	// Booted is what the PC booted (its agent reads the kernel command line; zero: not
	// said): the configuration then says whether the PC must restart to follow the
	// schedule now.
	Booted resolve.Running
	// ByAgent: the host's own agent asks, and will run the guest it is given; that version
	// is then noted as in use, so that it stays on the boot server (image gc). A user
	// looking at the configuration does not hold anything.
	ByAgent bool
}

// AgentConfig is the configuration host's node agent gets: the resolver's assignment
// (sitemgmt/resolve) as the agent's document, with the host's last calibration handed
// back (Agents.InterferenceProfile), its pending reboot or power-off, until the agent's
// heartbeat answers it (Power.Pending), and the Slurm controller's version
// (Slurm.ControllerVersion). An unknown host is a *resolve.UnknownHostError
// (404).
func (hs *Hosts) AgentConfig(host string, req AgentRequest) (*wire.AgentConfig, error) {
	s := hs.s
	h := s.Snapshot().Host(host)
	if h == nil {
		return nil, &resolve.UnknownHostError{Name: host}
	}
	cfg, err := s.Snapshot().Resolver.AgentConfig(h, resolve.Query{At: req.At, BootServer: req.BootServer, Held: s.Images.Held(),
		Interference: s.Agents.InterferenceProfile}, req.Booted)
	if err != nil {
		return nil, err
	}
	cfg.Power = s.Power.Pending(host)
	cfg.SlurmctldVersion = s.Slurm.ControllerVersion()
	if req.ByAgent {
		var guest []string
		if cfg.Guest != nil {
			guest = []string{cfg.Guest.Guest.Image + "/" + cfg.Guest.Resolved.Version}
		}
		s.Images.NoteBooted(host, true, guest, req.At)
	}
	return cfg, nil
}

// GuestSecretsFor refuses (authz-style 403 text, as model.Invalid is not) unless host's
// schedule gives it a compute guest at req.At: only such a guest needs the cluster's
// secrets (the munge key), and only while it runs. It answers the configuration it judged.
func (hs *Hosts) GuestSecretsFor(host string, req AgentRequest) (*wire.AgentConfig, error) {
	cfg, err := hs.AgentConfig(host, req)
	if err != nil {
		return nil, err
	}
	if cfg.Guest == nil || cfg.Guest.ImageKind != model.ImageCompute {
		return nil, &NoGuestSecrets{Host: host, Mode: cfg.Mode}
	}
	return cfg, nil
}

// SeatConfig is what host's seat gets at req.At (sitemgmt/seatconf): the login files
// rendered from its pool's (or the site's) desktopLogin with its secrets from dir, its
// printing, and, when its mode now is a course-vm mode whose VM can run there (the
// resolver's answer, as in AgentConfig), the course VM as the greeter's default session;
// while an exam holds it, the locked seat's files.
// When university logins cannot work there (nothing configured, a secret missing), the
// answer says why in Unavailable, for the PC's login screen; an error is a failure of
// the site manager.
func (hs *Hosts) SeatConfig(host string, req AgentRequest, dir seatconf.SecretDir) (*wire.SeatConfig, error) {
	snap := hs.s.Snapshot()
	site := snap.Site
	h := site.Host(host)
	if h == nil {
		return nil, model.NotFound("host", host)
	}
	seat := seatconf.SeatFor(site, h.Pool)
	a := snap.Resolver.For(h, resolve.Query{At: req.At, BootServer: req.BootServer, Held: hs.s.Images.Held()})
	if a.CourseVM != nil {
		seat.CourseVM = &seatconf.CourseVM{Mode: a.Mode.Name, Image: site.Image(a.CourseVM.Image)}
	}
	seat.Exam = a.Exam
	var sec seatconf.Secrets
	if seat.Login != nil {
		var err error
		if sec, err = dir.For(host, seat.Login); err != nil {
			return nil, err
		}
	}
	return seatconf.Render(seat, host, h.Pool, sec)
}

// NoGuestSecrets is GuestSecretsFor's refusal: the host runs no compute guest now.
type NoGuestSecrets struct{ Host, Mode string }

func (e *NoGuestSecrets) Error() string {
	return "host " + e.Host + " runs no compute guest in mode " + e.Mode + " now: no guest secrets"
}

// ---- the host list's writes ----

// HostFields are what the pages edit of a host: its addresses and where it belongs.
type HostFields struct {
	MAC, IP, BootServer, Pool string
}

// Add creates host name with fields f, refusing a name the site has (409). Authorised by
// authz like every write (service.Update).
func (hs *Hosts) Add(ctx context.Context, authz Authorizer, name string, f HostFields) ([]model.Change, error) {
	return hs.s.Update(ctx, authz, false, func(site *model.Site) error {
		if site.Host(name) != nil {
			return model.Conflict("duplicate host %q", name)
		}
		site.Hosts = append(site.Hosts, model.Host{Name: name, MAC: f.MAC, IP: f.IP, Pool: f.Pool, BootServer: f.BootServer})
		return nil
	})
}

// Edit sets host name's addresses, boot server and pool to f, keeping the rest (its
// weekly rules and their owners). No change is written when f is what the host has.
func (hs *Hosts) Edit(ctx context.Context, authz Authorizer, name string, f HostFields) ([]model.Change, error) {
	return hs.s.Update(ctx, authz, false, func(site *model.Site) error {
		cur := site.Host(name)
		if cur == nil {
			return model.Invalid("host %s was removed meanwhile", name)
		}
		cur.MAC, cur.IP, cur.BootServer, cur.Pool = f.MAC, f.IP, f.BootServer, f.Pool
		return nil
	})
}

// Delete removes host name (a host that bookings still name is refused by the write path,
// naming them).
func (hs *Hosts) Delete(ctx context.Context, authz Authorizer, name string) ([]model.Change, error) {
	return hs.s.Update(ctx, authz, false, func(site *model.Site) error {
		n := len(site.Hosts)
		site.Hosts = slices.DeleteFunc(site.Hosts, func(x model.Host) bool { return x.Name == name })
		if len(site.Hosts) == n {
			return model.Invalid("host %s was removed meanwhile", name)
		}
		return nil
	})
}

// ---- CSV import ----

// RowProblem is why an import into one pool refuses a row: Host is the row's host, for
// the front end to find its line.
type RowProblem struct{ Host, Problem string }

// ReadImport reads a hosts CSV (the format and its meaning: sitefile.ParseHostsCSV,
// ImportHosts), checking each row's fields; a bad row is an error naming its line. With
// pool set (a pool's import page), rows must be hosts of that pool, neither new hosts of
// another pool nor hosts that exist in another (a move is done on the host's own page),
// and name boot servers the site has: what breaks these rules is refused, row by row.
func (hs *Hosts) ReadImport(csv io.Reader, pool string) ([]model.Host, []RowProblem, error) {
	hosts, err := sitefile.ParseHostsCSV(csv)
	if err != nil || pool == "" {
		return hosts, nil, err
	}
	site := hs.s.Snapshot().Site
	var refused []RowProblem
	for _, h := range hosts {
		if h.Pool != pool {
			refused = append(refused, RowProblem{h.Name, fmt.Sprintf("host %s is for pool %s: this page imports hosts of pool %s only", h.Name, h.Pool, pool)})
		} else if cur := site.Host(h.Name); cur != nil && cur.Pool != pool {
			refused = append(refused, RowProblem{h.Name, fmt.Sprintf("host %s exists in pool %s: move it on its own page", h.Name, cur.Pool)})
		}
		if h.BootServer != "" && site.BootServer(h.BootServer) == nil {
			refused = append(refused, RowProblem{h.Name, fmt.Sprintf("host %s: unknown boot server %q", h.Name, h.BootServer)})
		}
	}
	return hosts, refused, nil
}

// Import writes the hosts ReadImport read as one validated change, so that a file with
// one bad row changes nothing: a host of the same name is replaced, keeping its weekly
// rules and their owners; new hosts are added; hosts not in the file are left alone.
// With dryRun it answers what would change (a preview) and writes nothing.
func (hs *Hosts) Import(ctx context.Context, authz Authorizer, hosts []model.Host, dryRun bool) ([]model.Change, error) {
	return hs.s.Update(ctx, authz, dryRun, func(site *model.Site) error {
		sitefile.ImportHosts(site, hosts)
		return nil
	})
}
