package sitefile

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// The hosts CSV file. Administrators keep host lists in spreadsheets; the columns are
//
//	name,mac,ip,pool[,bootServer]
//
// in this order, or in any order under a header row naming them; `,`, `;` or tab
// separated. Rows add new hosts or replace existing ones by name; hosts not in the file
// are left alone.

// ImportHosts applies imported hosts to site: a host of the same name is replaced, keeping
// its weekly rules and bookings (the CSV does not carry schedules); new hosts are added.
func ImportHosts(site *model.Site, hosts []model.Host) {
	index := make(map[string]int, len(site.Hosts))
	for i := range site.Hosts {
		index[site.Hosts[i].Name] = i
	}
	for _, h := range hosts {
		if i, ok := index[h.Name]; ok {
			h.Weekly, h.RuleOwners = site.Hosts[i].Weekly, site.Hosts[i].RuleOwners
			site.Hosts[i] = h
		} else {
			index[h.Name] = len(site.Hosts)
			site.Hosts = append(site.Hosts, h)
		}
	}
}

// Columns of the import format, in the order a file without a header gives them.
var csvColumns = []string{"name", "mac", "ip", "pool", "bootserver"}

// csvColumn maps a header cell to a column: case and the separators people put into
// "boot server" do not matter. -1: not a column.
func csvColumn(cell string) int {
	c := strings.ToLower(strings.TrimSpace(cell))
	c = strings.NewReplacer(" ", "", "_", "", "-", "").Replace(c)
	for i, name := range csvColumns {
		if c == name {
			return i
		}
	}
	return -1
}

// detectSeparator picks the field separator from the first line that is not empty or a
// comment: spreadsheets in locales with a decimal comma (German Excel) write ';'. The
// separator that occurs most often outside quotes wins; ',' on a tie or when none does.
func detectSeparator(data []byte) rune {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		counts := map[rune]int{}
		quoted := false
		for _, r := range line {
			switch {
			case r == '"':
				quoted = !quoted
			case !quoted && (r == ',' || r == ';' || r == '\t'):
				counts[r]++
			}
		}
		best := ','
		for _, r := range []rune{';', '\t'} {
			if counts[r] > counts[best] {
				best = r
			}
		}
		return best
	}
	return ','
}

// ParseHostsCSV reads the import format, checking each row's fields so that errors name
// the line. It accepts a UTF-8 byte order mark, CRLF line ends, quoted fields, '#'
// comment lines, and ',', ';' or tab as the separator (detectSeparator). A first row
// whose every cell names a column is a header: then the columns may come in any order,
// and name, mac and pool are required.
func ParseHostsCSV(in io.Reader) ([]model.Host, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, model.Invalid("CSV: %v", err)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	rd := csv.NewReader(bytes.NewReader(data))
	rd.Comma = detectSeparator(data)
	rd.FieldsPerRecord = -1
	rd.TrimLeadingSpace = true
	rd.Comment = '#'
	// col[i] is the record index of column i (-1: absent); the default is the fixed order.
	col := []int{0, 1, 2, 3, 4}
	fixed := true
	first := true
	width := 0 // header columns
	var hosts []model.Host
	seen := map[string]int{}
	for {
		rec, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, model.Invalid("CSV: %v", err)
		}
		line, _ := rd.FieldPos(0)
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		if first {
			first = false
			if hdr, ok, err := csvHeader(rec); err != nil {
				return nil, model.Invalid("CSV line %d: %v", line, err)
			} else if ok {
				col, fixed, width = hdr, false, len(rec)
				continue
			}
		}
		if fixed && (len(rec) < 4 || len(rec) > 5) {
			return nil, model.Invalid("CSV line %d: expected name,mac,ip,pool[,bootServer] (or a header row naming the columns), got %d fields", line, len(rec))
		}
		if !fixed && len(rec) > width {
			return nil, model.Invalid("CSV line %d: %d fields, but the header names %d columns", line, len(rec), width)
		}
		field := func(c int) string {
			if col[c] < 0 || col[c] >= len(rec) {
				return ""
			}
			return rec[col[c]]
		}
		h := model.Host{Name: field(0), IP: field(2), Pool: field(3), BootServer: field(4)}
		if err := model.ValidHostname(h.Name); err != nil {
			return nil, model.Invalid("CSV line %d: %v", line, err)
		}
		// Checked here for the line number; service.Update canonicalises it.
		if _, err := model.NormalizeMAC(field(1)); err != nil {
			return nil, model.Invalid("CSV line %d: %v", line, err)
		}
		h.MAC = field(1)
		if h.IP != "" {
			if err := model.ValidIP(h.IP); err != nil {
				return nil, model.Invalid("CSV line %d: %v", line, err)
			}
		}
		if err := model.ValidName("pool", h.Pool); err != nil {
			return nil, model.Invalid("CSV line %d: %v", line, err)
		}
		if h.BootServer != "" {
			if err := model.ValidName("boot server", h.BootServer); err != nil {
				return nil, model.Invalid("CSV line %d: %v", line, err)
			}
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

// csvHeader recognises a header row: every non-empty cell names a column (ok; empty
// cells, which spreadsheets leave after the last column, are ignored). A row that names
// some columns but not all is an error: it is neither a header nor a host. The result
// maps each column to its record index (-1: absent).
func csvHeader(rec []string) (col []int, ok bool, err error) {
	col = []int{-1, -1, -1, -1, -1}
	known := 0
	var unknown []string
	for i, cell := range rec {
		c := csvColumn(cell)
		switch {
		case cell == "":
		case c < 0:
			unknown = append(unknown, cell)
		case col[c] >= 0:
			return nil, false, fmt.Errorf("column %q given twice in the header", cell)
		default:
			col[c] = i
			known++
		}
	}
	if known == 0 {
		return nil, false, nil
	}
	if len(unknown) > 0 {
		return nil, false, fmt.Errorf("unknown column %q in the header (known: name, mac, ip, pool, bootServer)", unknown[0])
	}
	for c, name := range []string{"name", "mac", "", "pool"} {
		if name != "" && col[c] < 0 {
			return nil, false, fmt.Errorf("the header has no %s column (columns: name, mac, pool; optional ip, bootServer)", name)
		}
	}
	return col, true, nil
}
