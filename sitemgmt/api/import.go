package api

import (
	"bytes"
	"net/http"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
	"github.com/overtime-hpc/overtime/sitemgmt/sitefile"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// CSV host import (the format and its meaning: sitefile.ParseHostsCSV, ImportHosts). The
// whole file is checked first (each bad row is reported with its line number) and then
// written as one validated change, so a file with one bad row changes nothing. With
// ?dryRun=true the answer lists what would change; `overtime host import` shows that
// before writing.
func (s *Server) importHosts(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.httpError(w, err)
		return
	}
	hosts, err := sitefile.ParseHostsCSV(bytes.NewReader(body))
	if err != nil {
		s.httpError(w, err)
		return
	}
	s.update(w, r, func(site *model.Site) (int, error) {
		sitefile.ImportHosts(site, hosts)
		return http.StatusOK, nil
	})
}

// mayImportHosts admits the import: only site and pool admins may change hosts'
// addresses and pools, which is all a CSV holds, so anyone else is refused before the
// body is read or parsed. What the file changes is then authorised as any change is,
// in service.Update.
func mayImportHosts(p authz.Principal) string {
	if why := canWrite(p); why != "" {
		return why
	}
	if !p.SiteAdmin && len(p.PoolAdmin) == 0 {
		return "user " + p.UID + " may not import hosts: only a site admin or a pool admin may"
	}
	return ""
}
