package api

import (
	"encoding/csv"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/overtime-hpc/overtime/sitemgmt/model"
)

// CSV host import. Administrators keep host lists in spreadsheets; the columns are
//
//	name,mac,ip,pool[,bootServer]
//
// with an optional header row. Rows add new hosts or replace existing ones by name; hosts
// not in the file are left alone. The whole file is checked first (each bad row is
// reported with its line number) and then written as one validated change, so a file
// with one bad row changes nothing.
func (s *Server) importHosts(w http.ResponseWriter, r *http.Request) {
	hosts, err := ParseHostsCSV(http.MaxBytesReader(w, r.Body, 32<<20))
	if err != nil {
		s.httpError(w, err)
		return
	}
	s.update(w, r, func(site *model.Site) (int, error) {
		index := make(map[string]int, len(site.Hosts))
		for i := range site.Hosts {
			index[site.Hosts[i].Name] = i
		}
		for _, h := range hosts {
			if i, ok := index[h.Name]; ok {
				h.Weekly = site.Hosts[i].Weekly // the CSV does not carry schedules
				site.Hosts[i] = h
			} else {
				index[h.Name] = len(site.Hosts)
				site.Hosts = append(site.Hosts, h)
			}
		}
		return http.StatusOK, nil
	})
}

// ParseHostsCSV reads the import format, checking each row's fields so that errors name
// the line.
func ParseHostsCSV(in io.Reader) ([]model.Host, error) {
	rd := csv.NewReader(in)
	rd.FieldsPerRecord = -1
	rd.TrimLeadingSpace = true
	rd.Comment = '#'
	var hosts []model.Host
	seen := map[string]int{}
	for {
		rec, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := rd.FieldPos(0)
		if err != nil {
			return nil, model.Invalid("CSV: %v", err)
		}
		if len(hosts) == 0 && len(rec) > 0 && strings.EqualFold(strings.TrimSpace(rec[0]), "name") {
			continue // header
		}
		if len(rec) < 4 || len(rec) > 5 {
			return nil, model.Invalid("CSV line %d: expected name,mac,ip,pool[,bootServer], got %d fields", line, len(rec))
		}
		h := model.Host{Name: rec[0], IP: rec[2], Pool: rec[3]}
		if len(rec) == 5 {
			h.BootServer = rec[4]
		}
		if err := model.ValidHostname(h.Name); err != nil {
			return nil, model.Invalid("CSV line %d: %v", line, err)
		}
		// Checked here for the line number; service.Update canonicalises it.
		if _, err := model.NormalizeMAC(rec[1]); err != nil {
			return nil, model.Invalid("CSV line %d: %v", line, err)
		}
		h.MAC = rec[1]
		if h.IP != "" {
			if err := model.ValidIP(h.IP); err != nil {
				return nil, model.Invalid("CSV line %d: %v", line, err)
			}
		}
		if err := model.ValidName("pool", h.Pool); err != nil {
			return nil, model.Invalid("CSV line %d: %v", line, err)
		}
		if prev, ok := seen[h.Name]; ok {
			return nil, model.Conflict("CSV line %d: host %s already given on line %d", line, h.Name, prev)
		}
		seen[h.Name] = line
		hosts = append(hosts, h)
	}
	if len(hosts) == 0 {
		return nil, model.Invalid("CSV: no hosts in the file")
	}
	return hosts, nil
}
