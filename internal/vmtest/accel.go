package vmtest

import "github.com/overtime-hpc/overtime/internal/kvmprobe"

// Accel returns the accelerator VMs use, "kvm" or "tcg", and why (internal/kvmprobe).
func Accel() (name, reason string) { return kvmprobe.Accel() }
