package render

import (
	"regexp"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// examCase is an exam host's boot. Each is checked by TestExamNoEscape; golden marks the
// ones that also have golden files.
type examCase struct {
	name   string
	golden bool
	boot   func(t *testing.T) Boot
}

func examCases() []examCase {
	site := testSite()
	exam := func(t *testing.T, host, mode string, others ...string) Boot {
		b := testBoot(t, site, host, "", mode, `pool lab-a exception "exam-bio" (exam)`, others...)
		b.Exam = true
		return b
	}
	return []examCase{
		// The caller offers the usual entries; an exam renders none of them.
		{"exam", true, func(t *testing.T) Boot { return exam(t, "pc-a01", "desktop", "local", "maint", "cluster") }},
		{"exam-image-missing", true, func(t *testing.T) Boot { return exam(t, "pc-a01", "desktop-next", "local", "maint") }},
		{"exam-course-vm", false, func(t *testing.T) Boot { return exam(t, "pc-a03", "course-ml", "local") }},
		{"exam-no-initrd", false, func(t *testing.T) Boot {
			b := exam(t, "pc-a01", "maint", "local")
			b.Mode = &model.Mode{Name: "maint", Kind: model.KindMaintenance, Kernel: "maintenance/vmlinuz-6.12"}
			return b
		}},
		{"exam-unavailable", false, func(t *testing.T) Boot {
			b := exam(t, "pc-b1", "desktop", "local", "maint")
			b.Check = func(*model.Mode, *model.ImageVersion) string { return "no vmlinuz on the boot server" }
			return b
		}},
	}
}

// TestExamNoEscape: an exam host's boot scripts boot its mode and nothing else. The iPXE
// script, read as iPXE tokenizes it (ipxeCommands), has no menu, no choice, no shell,
// no local disk boot and no exit back to the firmware; every command that can fail says
// where to go on failure (iPXE ends a script at a failing command without "||"), and the
// failure path asks the boot server again. The PXELINUX configuration has no UI module,
// no prompt or escape to it, no options and a single label; a load failure reboots.
func TestExamNoEscape(t *testing.T) {
	forbiddenIPXE := []string{"menu", "item", "choose", "shell", "sanboot", "exit", "login", "prompt", "config", "poweroff"}
	for _, ec := range examCases() {
		t.Run(ec.name, func(t *testing.T) {
			b := ec.boot(t)
			script := renderBoot(t, IPXE, b)
			checkCommon(t, "ipxe-"+ec.name, []byte(script))
			cmds := map[string]bool{}
			for _, c := range ipxeCommands(script) {
				f := strings.Fields(c)
				cmds[f[1]] = true
				if f[1] == "expands" {
					t.Errorf("expansion or quote in an exam script: %s", c)
				}
			}
			for _, c := range forbiddenIPXE {
				if cmds[c] {
					t.Errorf("exam iPXE script runs %s:\n%s", c, script)
				}
			}
			for _, s := range []string{labelLocalDisk, "mode-local", "mode-maint\n", "mode-cluster"} {
				if strings.Contains(script, s) {
					t.Errorf("exam iPXE script names %s:\n%s", s, script)
				}
			}
			if !regexp.MustCompile(`\nchain --replace --autofree https?://\S+/boot/ipxe/` + b.MAC + ` \|\| goto ` + labelFailed + `\n`).MatchString(script) {
				t.Errorf("exam iPXE script does not ask its boot server again on failure:\n%s", script)
			}
			kernel := false
			for n, l := range strings.Split(strings.TrimSuffix(script, "\n"), "\n") {
				f := strings.Fields(l)
				if len(f) == 0 || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ":") {
					continue
				}
				if f[0] != "echo" && f[0] != "goto" && !strings.Contains(l, " ||") {
					t.Errorf("line %d can fail without a way on: %q", n+1, l)
				}
				if f[0] == "kernel" {
					kernel = true
					if f[len(f)-4] != ExamKernelArg {
						t.Errorf("kernel line does not end in %s before its failure path: %q", ExamKernelArg, l)
					}
				}
			}
			missing := b.Check != nil || b.Image == nil && b.Mode.Image != ""
			if kernel == missing {
				t.Errorf("kernel line present %v for an exam whose mode is missing %v:\n%s", kernel, missing, script)
			}

			cfg := renderBoot(t, PXELinux, b)
			checkCommon(t, "pxelinux-"+ec.name, []byte(cfg))
			count := map[string]int{}
			for _, d := range pxelinuxDirectives(cfg) {
				count[strings.SplitN(d, " ", 2)[1]]++
			}
			for _, d := range []string{"PROMPT", "NOESCAPE", "ALLOWOPTIONS", "DEFAULT", "ONERROR", "LABEL"} {
				if count[d] != 1 {
					t.Errorf("PXELINUX directive %s appears %d times, want once:\n%s", d, count[d], cfg)
				}
			}
			for d := range count {
				if d == "UI" || strings.HasPrefix(d, "MENU") || d == "LOCALBOOT" || d == "TEXT HELP" || d == "TIMEOUT" {
					t.Errorf("exam PXELINUX configuration has %s:\n%s", d, cfg)
				}
			}
			label := "mode-" + b.Mode.Name
			for _, l := range []string{"PROMPT 0", "NOESCAPE 1", "ALLOWOPTIONS 0", "DEFAULT " + label, "LABEL " + label, "ONERROR " + syslinuxReboot} {
				if !strings.Contains(cfg, "\n"+l+"\n") {
					t.Errorf("exam PXELINUX configuration lacks %q:\n%s", l, cfg)
				}
			}
			if missing != strings.Contains(cfg, "\n  COM32 "+syslinuxReboot+"\n") {
				t.Errorf("a missing exam mode must reboot, an available one boot:\n%s", cfg)
			}
			if !missing && !strings.Contains(cfg, " "+ExamKernelArg+"\n") {
				t.Errorf("APPEND lacks %s:\n%s", ExamKernelArg, cfg)
			}
		})
	}
}

// An exam whose mode is the local disk boots it at once, without a menu.
func TestExamLocalDisk(t *testing.T) {
	b := testBoot(t, testSite(), "pc-a10", "", "local", `host pc-a10 exception "exam-win" (exam)`, "desktop", "maint")
	b.Exam = true
	script := renderBoot(t, IPXE, b)
	if strings.Contains(script, "choose") || strings.Contains(script, "mode-desktop") || !strings.Contains(script, "\ngoto "+labelLocalDisk+"\n") {
		t.Errorf("local-disk exam iPXE script:\n%s", script)
	}
	cfg := renderBoot(t, PXELinux, b)
	if strings.Contains(cfg, "MENU") || strings.Contains(cfg, "mode-desktop") || strings.Count(cfg, "\nLABEL ") != 1 || !strings.Contains(cfg, "\n  LOCALBOOT 0\n") {
		t.Errorf("local-disk exam PXELINUX configuration:\n%s", cfg)
	}
}

// An exam needs a host: unknown PCs are never in one (an exception targets hosts and
// pools of the directory), and the retry needs the host's own script.
func TestExamNeedsHost(t *testing.T) {
	b := testBoot(t, testSite(), "", "52:54:00:99:99:99", "desktop", "x")
	b.Exam = true
	if err := IPXE(&strings.Builder{}, b); err == nil || !strings.Contains(err.Error(), "exam") {
		t.Fatalf("exam boot of an unknown MAC: %v", err)
	}
}

// The deciding rule (and an unavailability reason) stays inert in exam scripts too,
// where it reaches a comment, an echo and a PXELINUX SAY line.
func TestExamFreeTextInert(t *testing.T) {
	examWithText := func(text string) Boot {
		b := bootWithText(t, text)
		b.Exam = true
		return b
	}
	for _, unavailable := range []bool{false, true} {
		for _, text := range append(append([]string{}, hostileTexts...), randomTexts(200)...) {
			plain, hostile := examWithText("plain words"), examWithText(text)
			if unavailable {
				plain.Check = func(*model.Mode, *model.ImageVersion) string { return "gone: plain words" }
				hostile.Check = func(*model.Mode, *model.ImageVersion) string { return "gone: " + text }
			}
			want, got := ipxeCommands(renderBoot(t, IPXE, plain)), ipxeCommands(renderBoot(t, IPXE, hostile))
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("text %q changes the exam iPXE commands:\n got %q\nwant %q", text, got, want)
			}
			want, got = pxelinuxDirectives(renderBoot(t, PXELinux, plain)), pxelinuxDirectives(renderBoot(t, PXELinux, hostile))
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("text %q changes the exam PXELINUX directives:\n got %q\nwant %q", text, got, want)
			}
		}
	}
}
