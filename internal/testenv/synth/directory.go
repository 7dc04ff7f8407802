package synth

import (
	"context"
	"path/filepath"
	"time"

	"github.com/overtime-hpc/overtime/internal/slapdenv"
	"github.com/overtime-hpc/overtime/sitemgmt/ldapstore"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// Directory is a throwaway slapd under dir holding a site, for benchmarks: the directory
// initialised (admin "admin" with adminPassword) and site written in.
type Directory struct {
	Slapd *slapdenv.Server
	Store *ldapstore.Store
	// Written is how long writing the site took (one LDAP add per entry).
	Written time.Duration
}

// StartDirectory starts slapd in dir/slapd with opt, initialises the directory as site
// name siteName and writes site (nil: none) into it.
func StartDirectory(ctx context.Context, dir, siteName, adminPassword string, site *model.Site, opt slapdenv.Options) (*Directory, error) {
	sl, err := slapdenv.Start(filepath.Join(dir, "slapd"), opt)
	if err != nil {
		return nil, err
	}
	return Fill(ctx, sl, siteName, adminPassword, site)
}

// Fill initialises the directory of a running slapd (the first of a replicated set, say)
// as StartDirectory does and writes site (nil: none) into it. Close stops sl.
func Fill(ctx context.Context, sl *slapdenv.Server, siteName, adminPassword string, site *model.Site) (*Directory, error) {
	d := &Directory{Slapd: sl}
	var err error
	if d.Store, err = ldapstore.Open(ldapstore.Config{URL: sl.URL, BaseDN: sl.BaseDN, BindDN: sl.RootDN, BindPassword: sl.RootPW}); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.Store.Init(ctx, ldapstore.InitOptions{SiteName: siteName, Timezone: "Europe/Berlin", AdminUID: "admin", AdminPassword: adminPassword}); err != nil {
		d.Close()
		return nil, err
	}
	if site == nil {
		return d, nil
	}
	cur, err := d.Store.Load(ctx)
	if err != nil {
		d.Close()
		return nil, err
	}
	start := time.Now()
	if _, err := d.Store.Apply(ctx, cur, site); err != nil {
		d.Close()
		return nil, err
	}
	d.Written = time.Since(start)
	return d, nil
}

// Close stops the store's connections and slapd.
func (d *Directory) Close() {
	if d.Store != nil {
		d.Store.Close()
	}
	d.Slapd.Stop()
}
