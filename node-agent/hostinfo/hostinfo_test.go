package hostinfo

import "testing"

func TestMemTotalMB(t *testing.T) {
	if mb := MemTotalMB(); mb < 64 {
		t.Errorf("MemTotalMB = %d, want the machine's memory", mb)
	}
}
