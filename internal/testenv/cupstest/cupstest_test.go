package cupstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/poll"
)

// A job sent with lp reaches the queue and is listed with its owner and data.
func TestPrint(t *testing.T) {
	s := Start(t, "room-101")
	doc := filepath.Join(t.TempDir(), "page.txt")
	if err := os.WriteFile(doc, []byte("hello, printer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("lp", "-h", s.Addr, "-d", s.Queue, doc).CombinedOutput(); err != nil {
		t.Fatalf("lp: %v\n%s", err, out)
	}
	var jobs []Job
	poll.Until(t, "the job completed", 10*time.Second, func() bool { jobs = s.Jobs(t); return len(jobs) == 1 })
	if jobs[0].User != "root" || jobs[0].Data != "hello, printer\n" {
		t.Fatalf("job %+v", jobs[0])
	}
}
