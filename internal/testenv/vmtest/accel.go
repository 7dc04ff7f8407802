package vmtest

import "github.com/overtime-hpc/overtime/node-agent/kvmprobe"

// Accel returns the accelerator VMs use, "kvm" or "tcg", and why (node-agent/kvmprobe).
func Accel() (name, reason string) { return kvmprobe.Accel() }
