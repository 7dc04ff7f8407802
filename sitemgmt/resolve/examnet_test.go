package resolve

import (
	"slices"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// TestExamNetwork: the agent's configuration carries what the PC may reach exactly while
// an exam holds it: the deciding exam's allow list (the host's own exam over its pool's)
// after what the PC needs from its own boot server (pc-a2 is answered by bs-b).
func TestExamNetwork(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(h int) time.Time { return time.Date(2026, 12, 2, h, 30, 0, 0, berlin) }
	site := testSite(t)
	site.Printing = &model.Printing{Server: "print.uni.example"}
	exc := func(name string, from, to int, tg model.Target, allow ...string) model.Exception {
		return model.Exception{Name: name, Kind: model.ExceptionExam, Mode: "desktop", Allow: allow,
			Start: time.Date(2026, 12, 2, from, 0, 0, 0, berlin), End: time.Date(2026, 12, 2, to, 0, 0, 0, berlin),
			Targets: []model.Target{tg}}
	}
	site.Exceptions = []model.Exception{
		exc("exam-pool", 10, 12, model.Target{Pool: "lab-a"}, "exam.uni.example:443"),
		exc("exam-host", 11, 12, model.Target{Host: "pc-a2"}, "10.0.5.0/24"),
	}
	r := newResolver(t, site)
	seat := func(bs string) []wire.ExamEndpoint {
		return []wire.ExamEndpoint{{Endpoint: bs, For: wire.ExamForBootServer}, {Endpoint: bs + ":8080", For: wire.ExamForSiteManager},
			{Endpoint: "print.uni.example:631", For: wire.ExamForPrint}}
	}
	for _, tc := range []struct {
		name string
		host string
		at   time.Time
		want []wire.ExamEndpoint // nil: no exam network
	}{
		{"before the exam", "pc-a1", at(9), nil},
		{"pool exam", "pc-a1", at(10), append(seat("10.1.0.1"), wire.ExamEndpoint{Endpoint: "exam.uni.example:443", For: wire.ExamForExam})},
		{"pool exam, another boot server", "pc-a2", at(10), append(seat("10.2.0.1"), wire.ExamEndpoint{Endpoint: "exam.uni.example:443", For: wire.ExamForExam})},
		{"the host's exam wins", "pc-a2", at(11), append(seat("10.2.0.1"), wire.ExamEndpoint{Endpoint: "10.0.5.0/24", For: wire.ExamForExam})},
		{"other pool", "pc-b1", at(10), nil},
		{"after the exam", "pc-a1", at(12), nil},
	} {
		cfg, err := r.AgentConfig(site.Host(tc.host), Query{At: tc.at}, Running{})
		if err != nil {
			t.Fatal(err)
		}
		if tc.want == nil {
			if cfg.ExamNetwork != nil {
				t.Errorf("%s: exam network %+v outside an exam", tc.name, cfg.ExamNetwork)
			}
			continue
		}
		if !cfg.Exam || cfg.ExamNetwork == nil || !slices.Equal(cfg.ExamNetwork.Allow, tc.want) {
			t.Errorf("%s: exam %v network %+v\nwant %v", tc.name, cfg.Exam, cfg.ExamNetwork, tc.want)
		}
	}
}
