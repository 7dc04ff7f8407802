package test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/imagetest"
	"github.com/overtime-hpc/overtime/internal/testenv/slurmlab"
	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
)

func TestDevSeat(t *testing.T) {
	desk := imagetest.Get(t, "desktop")
	compute := imagetest.Get(t, "compute-guest")
	mungeKey := slurmlab.NewMungeKey(t, t.TempDir())
	uni, secrets := studentDirectory(t)
	l := bootlab.Start(t, bootlab.Options{Now: desktopNow, ServeArgs: []string{"--munge-key", mungeKey, "--desktop-secrets", secrets}})
	l.Expose(t, bootlab.ServerIP+":636", strings.TrimPrefix(uni.LDAPSURL, "ldaps://"))
	l.CopyImage(desk.Dir, "desktop/v1")
	l.CopyImage(compute.Dir, "compute/v1")
	l.Apply(desktopSite(l, desk, compute) + seatSite(t, uni))
	l.StartBootServer()
	tokFile := filepath.Join(t.TempDir(), "desk1.token")
	l.MustRun("host", "credential", "desk1", "--out", tokFile)
	tok, _ := os.ReadFile(tokFile)
	l.NS.AddTap("tapd1", bootlab.Bridge)
	dir := filepath.Join(t.TempDir(), "desk1")
	os.MkdirAll(dir, 0o755)
	vm := vmtest.StartT(t, vmtest.Config{Name: "desk1", Dir: dir, NS: l.NS, Tap: "tapd1", MAC: "52:54:00:0d:00:01",
		Firmware: vmtest.BIOS, Disks: []string{idDisk(t, "ext4", strings.TrimSpace(string(tok)))}, MemoryMB: 2048, CPUs: 2, Display: true})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- desk1 console (end):\n%s", vm.Console.Tail(12000))
		}
	})
	start := time.Now()
	expect := func(re string, within time.Duration) {
		t.Helper()
		if _, err := vm.Console.Expect(regexp.MustCompile(re), within); err != nil {
			t.Fatalf("desk1: %v", err)
		}
	}
	expect(`seat-config: wrote [0-9]+ files`, desktopBootWithin)
	t.Logf("seat-config after %s", time.Since(start))
	expect(`login: `, desktopBootWithin)
	vm.Console.Send("student")
	expect(`Password:`, 2*time.Minute)
	vm.Console.Send("ldap-pw")
	expect(`student@desk1:~\$ `, 2*time.Minute)
	t.Logf("console login after %s", time.Since(start))
	checkSeatGreeter(t, vm, testenv.ArtefactDir(t, "dev-seat"))
	t.Logf("done after %s", time.Since(start))
}
