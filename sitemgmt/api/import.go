package api

import (
	"bytes"
	"net/http"

	"github.com/overtime-hpc/overtime/sitemgmt/authz"
)

// CSV host import (service.Hosts.ReadImport and Import, as the web UI's import page). The
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
	hosts, _, err := s.svc.Hosts.ReadImport(bytes.NewReader(body), "")
	if err != nil {
		s.httpError(w, err)
		return
	}
	changes, err := s.svc.Hosts.Import(r.Context(), principal(r).Check, hosts, dryRun(r))
	s.metrics.siteWrite(dryRun(r), changes, err)
	if err != nil {
		s.httpError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"dryRun": dryRun(r), "changes": changeList(changes)})
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
