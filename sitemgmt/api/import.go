package api

import (
	"net/http"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
	"github.com/overtime-hpc/overtime/sitemgmt/sitefile"
)

// CSV host import (the format and its meaning: sitefile.ParseHostsCSV, ImportHosts). The
// whole file is checked first (each bad row is reported with its line number) and then
// written as one validated change, so a file with one bad row changes nothing. With
// ?dryRun=true the answer lists what would change; `overtime host import` shows that
// before writing.
func (s *Server) importHosts(w http.ResponseWriter, r *http.Request) {
	hosts, err := sitefile.ParseHostsCSV(http.MaxBytesReader(w, r.Body, 32<<20))
	if err != nil {
		s.httpError(w, err)
		return
	}
	s.update(w, r, func(site *model.Site) (int, error) {
		sitefile.ImportHosts(site, hosts)
		return http.StatusOK, nil
	})
}
