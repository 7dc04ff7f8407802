package vmware

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// unavailableReason checks err is VMware's *guest.UnavailableError and returns its reason.
func unavailableReason(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		t.Fatalf("Available() = nil, want an UnavailableError")
	}
	var u *guest.UnavailableError
	if !errors.As(err, &u) || !guest.IsUnavailable(err) {
		t.Fatalf("error %v (%T) is not a *guest.UnavailableError", err, err)
	}
	if u.Backend != model.BackendVMware {
		t.Errorf("backend %q, want vmware", u.Backend)
	}
	if !strings.HasPrefix(err.Error(), "backend unavailable: vmware: ") {
		t.Errorf("message %q lacks the backend-unavailable prefix", err)
	}
	return u.Reason
}

func writeExec(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 99\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAvailableThisMachine: VMware is not installed here (no vmrun, no vmware-vmx, no
// /dev/vmmon), and the reason says exactly that.
func TestAvailableThisMachine(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no vmrun, whatever the machine has in PATH
	reason := unavailableReason(t, New(Config{}).Available(context.Background()))
	for _, want := range []string{"vmrun not in PATH"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q lacks %q", reason, want)
		}
	}
	if _, err := os.Stat("/usr/lib/vmware/bin/vmware-vmx"); err != nil && !strings.Contains(reason, "vmware-vmx not found (looked in /usr/lib/vmware/bin/vmware-vmx and PATH)") {
		t.Errorf("reason %q does not say vmware-vmx is missing", reason)
	}
	if _, err := os.Stat("/dev/vmmon"); err != nil && !strings.Contains(reason, "/dev/vmmon missing") {
		t.Errorf("reason %q does not say /dev/vmmon is missing", reason)
	}
	t.Logf("this machine: %s", reason)
}

func TestAvailableReasons(t *testing.T) {
	type env struct {
		vmrunMode  os.FileMode // 0: no vmrun in PATH
		vmx        bool        // /usr/lib/vmware/bin/vmware-vmx (executable)
		vmxNoExec  bool
		devVmmon   bool
		modules    string // /proc/modules content; "" = unreadable
		vmwareConf string
	}
	for _, c := range []struct {
		name    string
		env     env
		want    []string // substrings of the reason; nil: available
		notWant []string
	}{
		{"nothing", env{}, []string{"vmrun not in PATH", "vmware-vmx not found", "/dev/vmmon missing"}, nil},
		{"vmrun not executable", env{vmrunMode: 0o644, vmx: true, devVmmon: true},
			[]string{"vmrun at ", "/vmrun is not executable"}, []string{"vmware-vmx", "vmmon"}},
		{"vmware-vmx missing", env{vmrunMode: 0o755, devVmmon: true},
			[]string{"vmware-vmx not found (looked in /usr/lib/vmware/bin/vmware-vmx and PATH)"}, []string{"vmrun", "vmmon"}},
		{"vmware-vmx not executable", env{vmrunMode: 0o755, vmxNoExec: true, devVmmon: true},
			[]string{"vmware-vmx at /usr/lib/vmware/bin/vmware-vmx is not executable"}, []string{"vmrun"}},
		{"module not loaded", env{vmrunMode: 0o755, vmx: true, modules: "kvm 1 0 - Live 0x0\n"},
			[]string{"/dev/vmmon missing: vmmon kernel module not loaded"}, []string{"vmrun", "vmware-vmx"}},
		{"device without module", env{vmrunMode: 0o755, vmx: true, devVmmon: true, modules: "vmnet 1 0 - Live 0x0\n"},
			[]string{"vmmon kernel module not loaded (/proc/modules)"}, nil},
		{"device missing, modules unknown", env{vmrunMode: 0o755, vmx: true},
			[]string{"/dev/vmmon missing (vmmon kernel module not loaded or not built)"}, nil},
		{"libdir from config", env{vmrunMode: 0o755, devVmmon: true, vmwareConf: "libdir = \"/opt/vmware/lib\"\n"},
			[]string{"looked in /opt/vmware/lib/bin/vmware-vmx, /usr/lib/vmware/bin/vmware-vmx and PATH"}, nil},
		{"all there", env{vmrunMode: 0o755, vmx: true, devVmmon: true, modules: "vmmon 1 0 - Live 0x0\nvmnet 1 0 - Live 0x0\n"}, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, bin := t.TempDir(), t.TempDir()
			t.Setenv("PATH", bin)
			if c.env.vmrunMode != 0 {
				writeExec(t, filepath.Join(bin, "vmrun"), c.env.vmrunMode)
			}
			if c.env.vmx || c.env.vmxNoExec {
				mode := os.FileMode(0o755)
				if c.env.vmxNoExec {
					mode = 0o644
				}
				writeExec(t, filepath.Join(root, "usr/lib/vmware/bin/vmware-vmx"), mode)
			}
			if c.env.devVmmon {
				writeExec(t, filepath.Join(root, "dev/vmmon"), 0o600)
			}
			if c.env.modules != "" {
				writeFile(t, filepath.Join(root, "proc/modules"), c.env.modules)
			}
			if c.env.vmwareConf != "" {
				writeFile(t, filepath.Join(root, "etc/vmware/config"), c.env.vmwareConf)
			}
			b := New(Config{})
			b.root = root
			err := b.Available(context.Background())
			if c.want == nil {
				if err != nil {
					t.Fatalf("Available() = %v, want nil", err)
				}
				return
			}
			reason := unavailableReason(t, err)
			for _, w := range c.want {
				if !strings.Contains(reason, w) {
					t.Errorf("reason %q lacks %q", reason, w)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(reason, w) {
					t.Errorf("reason %q mentions %q", reason, w)
				}
			}
		})
	}
}

func TestAvailableConfigPaths(t *testing.T) {
	root := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	b := New(Config{VMrun: filepath.Join(root, "nope/vmrun"), VMX: filepath.Join(root, "nope/vmware-vmx")})
	b.root = root
	reason := unavailableReason(t, b.Available(context.Background()))
	for _, w := range []string{"vmrun not found at " + root + "/nope/vmrun", "vmware-vmx not found at " + root + "/nope/vmware-vmx"} {
		if !strings.Contains(reason, w) {
			t.Errorf("reason %q lacks %q", reason, w)
		}
	}
}

// TestUnavailableEveryMethod: when VMware is missing no method is a silent no-op, and none
// touches the host (Start creates no state directory).
func TestUnavailableEveryMethod(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	b := New(Config{})
	b.root = t.TempDir()
	ctx := context.Background()
	s := baseSpec()
	s.StateDir = filepath.Join(t.TempDir(), "state")
	calls := map[string]func() error{
		"Available":   func() error { return b.Available(ctx) },
		"Start":       func() error { return b.Start(ctx, s) },
		"Status":      func() error { _, err := b.Status(ctx, s.Name); return err },
		"Freeze":      func() error { return b.Freeze(ctx, s.Name) },
		"Thaw":        func() error { return b.Thaw(ctx, s.Name) },
		"SetCPULimit": func() error { return b.SetCPULimit(ctx, s.Name, 0.5) },
		"Stop":        func() error { return b.Stop(ctx, s.Name) },
	}
	want := b.Available(ctx)
	for name, call := range calls {
		err := call()
		if !guest.IsUnavailable(err) || err.Error() != want.Error() {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if _, err := os.Stat(s.StateDir); err == nil {
		t.Errorf("Start created %s while VMware is unavailable", s.StateDir)
	}
	if b.Kind() != model.BackendVMware {
		t.Errorf("Kind = %q", b.Kind())
	}
}

// TestAvailableRealPath: with the machine's own PATH the reason names vmrun exactly when
// there is none.
func TestAvailableRealPath(t *testing.T) {
	err := New(Config{}).Available(context.Background())
	_, lookErr := exec.LookPath("vmrun")
	_, vmmonErr := os.Stat("/dev/vmmon")
	if lookErr == nil && vmmonErr == nil && err == nil {
		return // a VMware host: nothing missing
	}
	reason := unavailableReason(t, err)
	if (lookErr != nil) != strings.Contains(reason, "vmrun not in PATH") {
		t.Errorf("LookPath(vmrun): %v; reason %q", lookErr, reason)
	}
	if (vmmonErr != nil) != strings.Contains(reason, "/dev/vmmon missing") {
		t.Errorf("/dev/vmmon: %v; reason %q", vmmonErr, reason)
	}
}

// TestExecRunner drives a fake vmrun script through the default runner (os/exec): the
// arguments reach it and its "Error: ..." output reaches the caller.
func TestExecRunner(t *testing.T) {
	bin, root := t.TempDir(), t.TempDir()
	log := filepath.Join(t.TempDir(), "log")
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	t.Setenv("VMRUN_LOG", log)
	writeFile(t, filepath.Join(root, "dev/vmmon"), "")
	writeExec(t, filepath.Join(root, "usr/lib/vmware/bin/vmware-vmx"), 0o755)
	script := "#!/bin/sh\necho \"$@\" >> \"$VMRUN_LOG\"\ncase \"$3\" in\n" +
		"list) if [ -e \"$VMRUN_LOG.fail\" ]; then echo 'Error: Unable to connect to host.'; exit 255; fi; echo 'Total running VMs: 0' ;;\n" +
		"*) echo 'Error: The virtual machine is not powered on'; exit 255 ;;\nesac\n"
	writeFile(t, filepath.Join(bin, "vmrun"), script)
	os.Chmod(filepath.Join(bin, "vmrun"), 0o755)

	b := New(Config{StateRoot: t.TempDir()})
	b.root = root
	ctx := context.Background()
	st, err := b.Status(ctx, "overtime-pc-a01")
	if err != nil || st.State != guest.StateAbsent {
		t.Fatalf("Status = %+v, %v", st, err)
	}
	if err := b.Freeze(ctx, "overtime-pc-a01"); !errors.Is(err, guest.ErrNotFound) {
		t.Errorf("Freeze: %v", err)
	}
	writeFile(t, log+".fail", "")
	if _, err := b.Status(ctx, "overtime-pc-a01"); err == nil || !strings.Contains(err.Error(), "Error: Unable to connect to host.") {
		t.Errorf("Status with failing vmrun: %v", err)
	}
	data, _ := os.ReadFile(log)
	if want := "-T ws list\n-T ws list\n-T ws list\n"; string(data) != want {
		t.Errorf("vmrun got:\n%s\nwant:\n%s", data, want)
	}
}
