package test

import (
	"fmt"
	"image"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/testenv/bootlab"
	"github.com/overtime-hpc/overtime/internal/testenv/bootsector"
	"github.com/overtime-hpc/overtime/internal/testenv/poll"
	"github.com/overtime-hpc/overtime/internal/testenv/vmtest"
)

// The graphical seat of a booted desktop (the desktop flavour: LightDM, Xfce), driven as a
// person drives it: keys typed on the PC's keyboard (QEMU's PS/2 keyboard, through the
// monitor), the screen read from its VGA card (screendump, kept as PNGs in the run's
// artefacts). What the screen cannot say (which session runs, as whom) is read from
// logind through a shell the student has on the serial console.

// keyPause paces typed keys: under TCG a GTK greeter takes each key in tens of
// milliseconds, and keys arriving faster than that were lost in trials.
const keyPause = 150 * time.Millisecond

// graphicalSeat drives one booted desktop's screen; shell runs a command in a console
// session of a logged-in user (logind's sessions are visible to every user).
type graphicalSeat struct {
	t     *testing.T
	vm    *vmtest.VM
	shots string // the artefact directory
	n     int
}

// drawnColours: a drawn greeter or desktop shows thousands of colours (gradients, icons,
// anti-aliased text); an X server whose clients have not painted yet shows black and its
// anti-aliased pointer, 78 colours in a run here.
const drawnColours = 256

// shot keeps the screen as NAME.png and says where; a screen of few colours is a text
// console or a blank one, not a graphical greeter or desktop.
func (g *graphicalSeat) shot(name string) string {
	g.t.Helper()
	path, img := g.keep(name)
	if n := vmtest.Colours(img, drawnColours); n < drawnColours {
		g.t.Errorf("screen %s: %d colours, not a graphical screen (%s)", name, n, path)
	}
	return path
}

// keep keeps the screen as NAME.png, whatever it shows, and says where.
func (g *graphicalSeat) keep(name string) (string, image.Image) {
	g.t.Helper()
	g.n++
	path := filepath.Join(g.shots, fmt.Sprintf("%02d-%s.png", g.n, name))
	img, err := g.vm.Screendump(path)
	if err != nil {
		g.t.Fatalf("screendump %s: %v", name, err)
	}
	g.t.Logf("screen %s: %s (%dx%d)", name, path, img.Bounds().Dx(), img.Bounds().Dy())
	return path, img
}

// waitDrawn waits until the screen is graphical (many colours: a drawn greeter or
// desktop, not the black of an X server whose clients have not painted yet), and keeps it
// as NAME.png.
func (g *graphicalSeat) waitDrawn(name string, within time.Duration) string {
	g.t.Helper()
	tmp := filepath.Join(g.t.TempDir(), "poll.png")
	bootlab.Eventually(g.t, "the screen drawn ("+name+")", within, func() bool {
		img, err := g.vm.Screendump(tmp)
		return err == nil && vmtest.Colours(img, drawnColours) >= drawnColours
	})
	return g.shot(name)
}

// session is one logind session as loginctl shows it.
type session struct{ ID, User, Class, Type, State string }

// sessions lists logind's sessions through the console shell.
func (g *graphicalSeat) sessions() []session {
	g.t.Helper()
	out, err := g.vm.Console.Run(`for s in $(loginctl list-sessions --no-legend | awk '{print $1}'); do `+
		`echo "SESSION Id=$s" $(loginctl show-session "$s" -p Name -p Class -p Type -p State); done`, time.Minute)
	if err != nil {
		g.t.Fatalf("loginctl: %v", err)
	}
	var all []session
	for _, m := range regexp.MustCompile(`(?m)^SESSION (.*?)\r?$`).FindAllStringSubmatch(out, -1) {
		kv := map[string]string{}
		for _, f := range strings.Fields(m[1]) {
			if k, v, ok := strings.Cut(f, "="); ok {
				kv[k] = v
			}
		}
		all = append(all, session{kv["Id"], kv["Name"], kv["Class"], kv["Type"], kv["State"]})
	}
	return all
}

// waitSession waits until a session of user and class (greeter, user) on X11 is active.
func (g *graphicalSeat) waitSession(what, user, class string, within time.Duration) {
	g.t.Helper()
	var last []session
	bootlab.Eventually(g.t, what, within, func() bool {
		last = g.sessions()
		for _, s := range last {
			if s.User == user && s.Class == class && s.Type == "x11" && s.State == "active" {
				return true
			}
		}
		return false
	})
}

// noSession: no session of user on X11 is left.
func (g *graphicalSeat) noSession(what, user string, within time.Duration) {
	g.t.Helper()
	bootlab.Eventually(g.t, what, within, func() bool {
		for _, s := range g.sessions() {
			if s.User == user && s.Type == "x11" && s.State != "closing" {
				return false
			}
		}
		return true
	})
}

// settle waits until the greeter has stopped changing (two screens a second apart differ
// in fewer pixels than a blinking text cursor): under TCG, keys typed while it still
// works on the last one (starting PAM, greying its fields while it authenticates) are
// lost.
func (g *graphicalSeat) settle() {
	g.t.Helper()
	tmp := g.t.TempDir()
	prev, err := g.vm.Screendump(filepath.Join(tmp, "a.png"))
	if err != nil {
		g.t.Fatal(err)
	}
	n := 0
	bootlab.Eventually(g.t, "the greeter's screen to settle", 2*time.Minute, func() bool {
		time.Sleep(time.Second) // the interval of the comparison, not a guess at readiness
		n++
		now, err := g.vm.Screendump(filepath.Join(tmp, fmt.Sprintf("%d.png", n%2)))
		if err != nil {
			return false
		}
		still := vmtest.Changed(prev, now) < 100
		prev = now
		return still
	})
}

// Lines PAM writes to the journal (forwarded to the serial console) for the greeter.
var (
	greeterRefused = regexp.MustCompile(`pam_sss\(lightdm:auth\): authentication failure;[^\n]*user=student`)
	greeterOpened  = regexp.MustCompile(`pam_unix\(lightdm:session\): session opened for user student`)
	greeterEither  = regexp.MustCompile(greeterRefused.String() + `|` + greeterOpened.String())
)

// typeName types a user's name and Return at the settled greeter, which then asks for the
// password.
func (g *graphicalSeat) typeName(user string) {
	g.t.Helper()
	g.settle()
	if err := g.vm.Monitor().Type(user+"\n", keyPause); err != nil {
		g.t.Fatal(err)
	}
}

// typePassword types a password and Return once the greeter has settled, and returns
// whether PAM refused it (false: the session opened).
func (g *graphicalSeat) typePassword(password string) (refused bool) {
	g.t.Helper()
	g.settle()
	if err := g.vm.Monitor().Type(password+"\n", keyPause); err != nil {
		g.t.Fatal(err)
	}
	m, err := g.vm.Console.Expect(greeterEither, 3*time.Minute)
	if err != nil {
		g.t.Fatalf("no answer from PAM to the password typed at the greeter: %v", err)
	}
	return greeterRefused.MatchString(m[0])
}

// login logs a user in at the greeter with their password.
func (g *graphicalSeat) login(user, password string) {
	g.t.Helper()
	g.typeName(user)
	g.enterPassword(user, password)
}

// enterPassword types a password the greeter must accept. A refusal is retried (twice):
// a key lost on the way under TCG gives a wrong password, which the journal reports.
func (g *graphicalSeat) enterPassword(user, password string) {
	g.t.Helper()
	for try := 1; g.typePassword(password); try++ {
		if try == 3 {
			g.t.Fatalf("the greeter refused %s's password three times", user)
		}
		g.t.Logf("the greeter refused %s's password as typed (try %d): typing it again", user, try)
	}
}

// Under TCG a drawn greeter takes a minute after its session starts, and Xfce three
// after the password (measured in this test's runs); the deadlines bound a hang.
const (
	greeterWithin = 5 * time.Minute
	desktopWithin = 8 * time.Minute
)

// checkSeatGreeter: the booted desktop shows LightDM's greeter; a wrong password does not
// log in (PAM says why on the journal, the greeter says so on the screen); the student's
// own password starts an Xfce session as them, which it leaves running (checkAbandoned
// ends it). The student is logged in on the serial console, from where logind is asked.
func checkSeatGreeter(t *testing.T, vm *vmtest.VM, shots string) *graphicalSeat {
	g := &graphicalSeat{t: t, vm: vm, shots: shots}
	g.waitSession("LightDM's greeter on seat0", "lightdm", "greeter", greeterWithin)
	g.waitDrawn("greeter", greeterWithin)

	// A wrong password: PAM refuses it (the journal says so), the greeter says so on the
	// screen and keeps the name, and no session starts.
	g.typeName("student")
	if !g.typePassword("wrong-pw") {
		t.Fatal("a wrong password at the greeter opened a session")
	}
	g.settle()
	g.shot("wrong-password")
	for _, s := range g.sessions() {
		if s.User == "student" && s.Type == "x11" {
			t.Fatalf("a wrong password started a session: %+v", s)
		}
	}

	// The right one, into the field the greeter left for it.
	g.enterPassword("student", "ldap-pw")
	g.waitSession("student's X11 session on seat0", "student", "user", 5*time.Minute)
	bootlab.Eventually(t, "Xfce's desktop running as student", desktopWithin, func() bool {
		out, err := vm.Console.Run("pgrep -u student -x xfdesktop >/dev/null && echo XFCE-UP", time.Minute)
		return err == nil && strings.Contains(out, "XFCE-UP")
	})
	g.waitDrawn("session", desktopWithin)
	return g
}

// windows is the X display's window tree (xwininfo), its named windows only, read by the
// student from the console with the X cookie of their graphical session (the
// XAUTHORITY of its processes: ~/.Xauthority on the NFS home may hold an older
// session's); an error while the session is still starting.
func (g *graphicalSeat) windows() (string, error) {
	g.t.Helper()
	return g.vm.Console.Run(`for p in $(pgrep -u student); do a=$(tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep '^XAUTHORITY='); `+
		`[ -n "$a" ] && export "$a" && break; done; DISPLAY=:0 xwininfo -root -tree | grep '"'`, time.Minute)
}

// checkAbandoned: the student's Xfce session, idle since they typed their password, with
// a lecture coming whose switch waits for their logout. Both are shown in the session as
// desktop notifications (xfce4-notifyd's windows on the screen): the coming switch, and
// the logout of an abandoned session under the pool's logoutIdle. The console session
// ends; the agent logs the graphical one out after its warning, the greeter is back for
// a moment, and the waiting switch restarts the PC. The caller set the policy and the
// lecture.
func checkAbandoned(t *testing.T, g *graphicalSeat, expect func(string, time.Duration)) {
	expect(`warning an abandoned session of its logout`, 3*time.Minute)
	var tree string
	if !poll.Wait(2*time.Minute, func() bool {
		var err error
		tree, err = g.windows()
		return err == nil && notifications(tree) >= 2
	}) {
		t.Fatalf("no two notifications (the switch, the logout) on the student's screen:\n%s", tree)
	}
	g.shot("notifications")
	if err := g.vm.Console.Send("exit"); err != nil {
		t.Fatal(err)
	}
	expect(`logged out abandoned sessions[^\n]*\(student\)`, 4*time.Minute)
}

// notifications counts the desktop notifications on the screen: xfce4-notifyd's windows
// in xwininfo's tree, but for its unmapped 10x10 client leader.
func notifications(tree string) int {
	n := 0
	for _, line := range strings.Split(tree, "\n") {
		if strings.Contains(line, `"xfce4-notifyd"`) && !strings.Contains(line, " 10x10+10+10 ") {
			n++
		}
	}
	return n
}

// courseVMRed is the colour the course VM's boot sector fills its screen with
// (bootsector.ScreenDisk).
var courseVMRed = bootsector.RGB(bootsector.Red)

// checkCourseVMSession: in the lecture's slot the greeter's default session is the course
// VM: the student logs in and the VM's own screen fills the PC's (QEMU's window covers
// the X screen, and the screen shows what the VM draws). The student is logged in on the
// console.
func checkCourseVMSession(t *testing.T, g *graphicalSeat) {
	g.waitSession("LightDM's greeter in the lecture", "lightdm", "greeter", greeterWithin)
	g.waitDrawn("lecture-greeter", greeterWithin)
	g.login("student", "ldap-pw")
	g.waitSession("student's course VM session", "student", "user", 5*time.Minute)
	screen, err := g.vm.Screendump(filepath.Join(g.t.TempDir(), "size.png"))
	if err != nil {
		t.Fatal(err)
	}
	full := fmt.Sprintf("%dx%d+0+0", screen.Bounds().Dx(), screen.Bounds().Dy())
	var qemu string
	bootlab.Eventually(t, "the course VM's window covering the screen ("+full+")", 5*time.Minute, func() bool {
		tree, err := g.windows()
		if err != nil {
			return false
		}
		for _, line := range strings.Split(tree, "\n") {
			if strings.Contains(line, `"QEMU (overtime-course-vm`) {
				qemu = line
			}
		}
		return strings.Contains(qemu, " "+full+" ")
	})
	tmp := filepath.Join(g.t.TempDir(), "vm.png")
	var share float64
	if !poll.Wait(5*time.Minute, func() bool {
		img, err := g.vm.Screendump(tmp)
		share = vmtest.Share(img, courseVMRed, 8)
		return err == nil && share >= 0.9
	}) {
		path, _ := g.keep("course-vm")
		t.Fatalf("the course VM's screen: %.0f%% of the PC's screen is its red (%s)", share*100, path)
	}
	t.Logf("the course VM fills the screen: %s, %.0f%% its red", strings.TrimSpace(qemu), share*100)
	g.keep("course-vm")
}
