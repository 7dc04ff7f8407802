package seatconf

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

// TestGoldenSessions: in a course-vm mode the seat carries the course VM's X session and
// LightDM's default session (testdata/session-*.golden); in a desktop mode neither file
// (the agent's manifest removes those of an earlier boot). Login and printing are
// rendered beside them as without a session.
func TestGoldenSessions(t *testing.T) {
	bio := &model.Image{Name: "bio101-vm", Kind: model.ImageCourseVM, Description: "BIO101 Übung: Zellbiologie – Mikroskopie"}
	for _, tc := range []struct {
		name string
		seat Seat
	}{
		{"session-course-vm", Seat{Printing: &model.Printing{Server: "print.uni.example"}, CourseVM: &CourseVM{Mode: "course-bio101", Image: bio}}},
		{"session-course-vm-no-description", Seat{CourseVM: &CourseVM{Mode: "course-chem", Image: &model.Image{Name: "chem-vm", Kind: model.ImageCourseVM}}}},
		{"session-desktop", Seat{Printing: &model.Printing{Server: "print.uni.example"}}},
		// An exam: the locked seat's X and LightDM files, no course VM, and no homes from
		// the file server, which the exam's network does not reach.
		{"session-exam", Seat{Printing: &model.Printing{Server: "print.uni.example"}, Exam: true,
			Homes: &model.Homes{Type: model.HomesNFS, Server: "home.uni.example", Path: "/export/homes/%(USER)"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(tc.seat, "pc-a01", "lab-a", Secrets{})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, f := range out.Files {
				b.WriteString("==> " + f.Path + " " + fmt.Sprintf("%04o", f.Mode) + "\n")
				b.Write(f.Content)
				if !isSeatFile(f.Path) {
					t.Errorf("file %s is not one of wire.SeatFiles", f.Path)
				}
			}
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./sitemgmt/seatconf -update writes it)", err)
			}
			if b.String() != string(want) {
				t.Errorf("%s differs from the renderer's output:\n%s", path, b.String())
			}
			has := strings.Contains(b.String(), wire.SeatCourseVMSession) && strings.Contains(b.String(), wire.SeatDefaultSession)
			if has != (tc.seat.CourseVM != nil) {
				t.Errorf("session files rendered: %v, course VM: %v", has, tc.seat.CourseVM != nil)
			}
			if mounted := strings.Contains(b.String(), wire.SeatPamMount); mounted != (tc.seat.Homes != nil && !tc.seat.Exam) {
				t.Errorf("homes from the file server: %v, homes %v, exam %v", mounted, tc.seat.Homes != nil, tc.seat.Exam)
			}
			locked := strings.Contains(b.String(), "Option \"DontVTSwitch\" \"true\"") && strings.Contains(b.String(), "\nallow-user-switching=false\n")
			if locked != tc.seat.Exam {
				t.Errorf("exam lockdown rendered: %v, exam: %v", locked, tc.seat.Exam)
			}
			// Free text stays inert: one printable ASCII line per value.
			for _, c := range []byte(b.String()) {
				if c != '\n' && (c < 0x20 || c > 0x7e) {
					t.Errorf("byte %#x in the rendered sessions", c)
				}
			}
		})
	}
}

// SessionLabel: readable, transliterated, one bounded line; the image's name without a
// description, or when nothing of it has an ASCII reading.
func TestSessionLabel(t *testing.T) {
	for _, tc := range []struct{ desc, want string }{
		{"", "Course VM: bio101-vm"},
		{"Übung für Müller", "Course VM: Uebung fuer Mueller"},
		{"细胞生物学", "Course VM: bio101-vm"},
		{"line\tbreak\nhere", "Course VM: line break here"},
		{strings.Repeat("Mikroskopie ", 10), "Course VM: Mikroskopie Mikroskopie Mikroskopie..."},
	} {
		got := SessionLabel(&model.Image{Name: "bio101-vm", Description: tc.desc})
		if got != tc.want || len(got) > maxLabel {
			t.Errorf("SessionLabel(%q) = %q, want %q", tc.desc, got, tc.want)
		}
	}
}
