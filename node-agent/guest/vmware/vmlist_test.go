package vmware

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseVMList runs the parser on `vmrun list` output as VMware documents and prints it:
// a "Total running VMs: N" header, then one .vmx path per line.
func TestParseVMList(t *testing.T) {
	for _, c := range []struct {
		name, out string
		want      []string
		err       string
	}{
		{"none", "Total running VMs: 0\n", nil, ""},
		{"two", "Total running VMs: 2\n/run/overtime/guest/overtime-pc-a01/overtime-pc-a01.vmx\n/home/jdoe/vmware/Windows 11/Windows 11.vmx\n",
			[]string{"/run/overtime/guest/overtime-pc-a01/overtime-pc-a01.vmx", "/home/jdoe/vmware/Windows 11/Windows 11.vmx"}, ""},
		{"crlf and trailing blank", "Total running VMs: 1\r\n/vm/a.vmx\r\n\r\n", []string{"/vm/a.vmx"}, ""},
		{"no trailing newline", "Total running VMs: 1\n/vm/a.vmx", []string{"/vm/a.vmx"}, ""},
		{"count mismatch", "Total running VMs: 2\n/vm/a.vmx\n", nil, "header says 2 running VMs, 1 listed"},
		{"error", "Error: Unable to connect to host.\n", nil, "Error: Unable to connect to host."},
		{"garbage", "vmrun version 1.17.0 build-22583795\n", nil, "no \"Total running VMs:\" line"},
		{"bad count", "Total running VMs: two\n", nil, "bad count"},
		{"empty", "", nil, "no \"Total running VMs:\" line"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseVMList([]byte(c.out))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
