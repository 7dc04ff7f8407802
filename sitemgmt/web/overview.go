package web

import (
	"net/http"
	"sort"
	"strings"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// PageSize is how many hosts one table page shows: with 10,000 hosts a page stays small
// (docs/benchmarks/ui.md measures bytes and server time per page).
const PageSize = 100

// PoolSummary is one pool's line on the overview.
type PoolSummary struct {
	Name, Room, Description string
	Hosts                   int
	Modes                   []Count // hosts per mode now
	States                  []Count // agents per shown state
	Harvest                 float64 // CPUs the pool's guests may use now
	CanAdmin                bool
}

// Count is a label and how many.
type Count struct {
	Label, Class string
	N            int
}

type overviewPage struct {
	Page
	Pools []PoolSummary
	Rows  []HostRow
	Paging
	Shown                int
	Q, Pool, Mode, State string
	PoolNames, ModeNames []string
	StateNames           []string
	Harvest              float64
	HostsTotal           int
}

// overview: every pool the user may see, with its hosts' modes and agents' states now,
// and a filtered, paged table of hosts.
func (u *UI) overview(q *Req) {
	site := q.Snap.Site
	statuses := u.statusMap(q)
	pg := overviewPage{Page: u.Base(q, "Overview", "overview"),
		Q: strings.TrimSpace(q.URL.Query().Get("q")), Pool: q.URL.Query().Get("pool"),
		Mode: q.URL.Query().Get("mode"), State: q.URL.Query().Get("state")}
	visible := map[string]*PoolSummary{}
	for _, p := range site.Pools {
		if MaySeePool(q.P, p.Name) {
			pg.PoolNames = append(pg.PoolNames, p.Name)
			visible[p.Name] = &PoolSummary{Name: p.Name, Room: p.Room, Description: p.Description, CanAdmin: MayAdminPool(q.P, p.Name)}
		}
	}
	for _, m := range site.Modes {
		pg.ModeNames = append(pg.ModeNames, m.Name)
	}
	modeCount := map[string]map[string]int{}
	stateCount := map[string]map[string]int{}
	stateClass := map[string]string{}
	var match []*model.Host
	for i := range site.Hosts {
		h := &site.Hosts[i]
		ps := visible[h.Pool]
		if ps == nil {
			continue
		}
		d := q.Snap.Engine.AtHost(h, q.Now)
		class, harvest, _ := AgentClass(statuses[h.Name])
		ps.Hosts++
		pg.HostsTotal++
		ps.Harvest += harvest
		pg.Harvest += harvest
		if modeCount[h.Pool] == nil {
			modeCount[h.Pool], stateCount[h.Pool] = map[string]int{}, map[string]int{}
		}
		modeCount[h.Pool][d.Mode]++
		stateCount[h.Pool][class]++
		stateClass[class] = class
		if pg.Pool != "" && h.Pool != pg.Pool || pg.Mode != "" && d.Mode != pg.Mode || pg.State != "" && class != pg.State {
			continue
		}
		if pg.Q != "" && !strings.Contains(h.Name, strings.ToLower(pg.Q)) && !strings.Contains(h.MAC, strings.ToLower(pg.Q)) && h.IP != pg.Q {
			continue
		}
		match = append(match, h)
	}
	for _, name := range pg.PoolNames {
		ps := visible[name]
		ps.Modes = counts(modeCount[name], nil)
		ps.States = counts(stateCount[name], stateClass)
		pg.Pools = append(pg.Pools, *ps)
	}
	for c := range stateClass {
		pg.StateNames = append(pg.StateNames, c)
	}
	sort.Strings(pg.StateNames)
	var from, to int
	pg.Paging, from, to = pageOf(q, len(match), PageSize)
	if from < to {
		pg.Rows = hostRows(q, match[from:to], statuses)
	}
	pg.Shown = len(pg.Rows)
	u.Render(q, http.StatusOK, "overview", pg)
}

func counts(m map[string]int, class map[string]string) []Count {
	out := make([]Count, 0, len(m))
	for k, n := range m {
		out = append(out, Count{Label: k, Class: class[k], N: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N > out[j].N || out[i].N == out[j].N && out[i].Label < out[j].Label })
	return out
}
