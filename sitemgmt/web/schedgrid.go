package web

// The schedule editor's form encoding of a week grid (schedule.WeekGrid: what the grid
// shows and how it becomes weekly rules lives in sitemgmt/schedule).

import (
	"strconv"
	"strings"

	"github.com/overtime-hpc/overtime/sitemgmt/schedule"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// inheritToken is a slot without a mode of its own in the grid form field.
const inheritToken = "-"

// EncodeGrid writes g for the form field: seven days separated by "|", each 144 slots
// separated by ",", a slot the index of its mode in modes or "-" for none.
func EncodeGrid(g schedule.WeekGrid, modes []string) string {
	idx := make(map[string]int, len(modes))
	for i, m := range modes {
		idx[m] = i
	}
	var b strings.Builder
	for d := 0; d < schedule.GridDays; d++ {
		if d > 0 {
			b.WriteByte('|')
		}
		for s := 0; s < schedule.GridSlots; s++ {
			if s > 0 {
				b.WriteByte(',')
			}
			if i, ok := idx[g[d][s]]; ok && g[d][s] != "" {
				b.WriteString(strconv.Itoa(i))
			} else {
				b.WriteString(inheritToken)
			}
		}
	}
	return b.String()
}

// DecodeGrid reads EncodeGrid's form, with modes the mode list the page was built with.
func DecodeGrid(s string, modes []string) (schedule.WeekGrid, error) {
	var g schedule.WeekGrid
	days := strings.Split(strings.TrimSpace(s), "|")
	if len(days) != schedule.GridDays {
		return g, model.Invalid("the schedule grid has %d days, want %d (reload the page)", len(days), schedule.GridDays)
	}
	for d, day := range days {
		slots := strings.Split(day, ",")
		if len(slots) != schedule.GridSlots {
			return g, model.Invalid("the schedule grid's %s has %d slots, want %d (reload the page)", schedule.DayLabels[d], len(slots), schedule.GridSlots)
		}
		for i, tok := range slots {
			tok = strings.TrimSpace(tok)
			if tok == inheritToken || tok == "" {
				continue
			}
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(modes) {
				return g, model.Invalid("the schedule grid's %s %s names no mode (%q; reload the page)", schedule.DayLabels[d], schedule.SlotClock(i), tok)
			}
			g[d][i] = modes[n]
		}
	}
	return g, nil
}
