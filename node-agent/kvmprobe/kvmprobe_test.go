package kvmprobe

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv/needs"
)

// TestProbeTCG: the probe guest runs under TCG, which is always available: the probe
// itself works, so a failed KVM probe means KVM, not the probe.
func TestProbeTCG(t *testing.T) {
	needs.Servers(t, "QEMU (qemu-system-x86)")
	if err := ProbeAccel("tcg"); err != nil {
		t.Fatalf("probe under TCG: %v", err)
	}
}

// TestAccel: Accel decides once and says why; KVM only when its probe passes.
func TestAccel(t *testing.T) {
	needs.Servers(t, "QEMU (qemu-system-x86)")
	name, reason := Accel()
	t.Logf("accelerator: %s (%s)", name, reason)
	kvmErr := ProbeAccel("kvm")
	switch {
	case name == "kvm" && kvmErr != nil:
		t.Errorf("Accel chose kvm, but a second probe failed: %v", kvmErr)
	case name == "tcg" && kvmErr == nil:
		t.Errorf("Accel chose tcg (%s), but KVM runs the probe guest", reason)
	case name != "kvm" && name != "tcg":
		t.Errorf("Accel = %q", name)
	}
	if n2, _ := Accel(); n2 != name {
		t.Errorf("Accel changed its mind: %s then %s", name, n2)
	}
	if ok, why := KVM(); ok != (name == "kvm") || why != reason {
		t.Errorf("KVM() = %v, %q; Accel said %s, %q", ok, why, name, reason)
	}
}

// TestProbeSource: the probe bytes in accel.go are probe.S assembled (GNU binutils).
func TestProbeSource(t *testing.T) {
	needs.Servers(t, "as and ld (binutils)")
	as, err := exec.LookPath("as")
	if err != nil {
		t.Fatalf("as not found (Debian package binutils): %v", err)
	}
	dir := t.TempDir()
	obj, bin := filepath.Join(dir, "probe.o"), filepath.Join(dir, "probe.bin")
	if out, err := exec.Command(as, "--64", "-o", obj, "probe.S").CombinedOutput(); err != nil {
		t.Fatalf("as: %v: %s", err, out)
	}
	if out, err := exec.Command("ld", "-m", "elf_x86_64", "-e", "0", "-Ttext=0", "--oformat", "binary", "-o", bin, obj).CombinedOutput(); err != nil {
		t.Fatalf("ld: %v: %s", err, out)
	}
	want, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if got := probeFirmware(); !bytes.Equal(got, want) {
		t.Errorf("probeFirmware() differs from probe.S assembled (%d vs %d bytes): update probeCode/probeReset", len(got), len(want))
	}
}
