package test

import (
	"fmt"
	"image"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/overtime-hpc/overtime/internal/screen"
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
	t     testing.TB
	vm    *vmtest.VM
	shots string // the artefact directory
	n     int
	typed time.Time // the last password's Return left the keyboard
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

// focus waits until the greeter's field want has the keyboard focus (read from the
// screen: screen.GreeterFocus); when it does not come within the deadline the test
// fails with what, and the screen is kept as NAME.png.
func (g *graphicalSeat) focus(want screen.Field, within time.Duration, name, what string) {
	g.t.Helper()
	tmp := filepath.Join(g.t.TempDir(), "focus.png")
	if !poll.Wait(within, func() bool {
		img, err := g.vm.Screendump(tmp)
		return err == nil && screen.GreeterFocus(img) == want
	}) {
		path, _ := g.keep(name)
		g.t.Fatalf("%s (%s)", what, path)
	}
}

// typeName types a user's name and Return once the greeter's name field has the focus,
// and waits until the password field has it. A greeter focuses the name field when PAM's
// first prompt reaches it: a greeter drawn but still starting (after a session ended,
// under TCG, that took over a minute in runs) takes no keys. (Escape would not reset it:
// the greeter's Escape opens its panel's menus.)
func (g *graphicalSeat) typeName(user string) {
	g.t.Helper()
	g.typeNameAnsweredWithin(user, time.Minute)
}

// typeNameAnsweredWithin is typeName with the time PAM may take to ask for the password:
// with the university's directory gone, sssd's lookup of the name waits out its network
// timeouts first (over a minute under TCG in a CI run).
func (g *graphicalSeat) typeNameAnsweredWithin(user string, within time.Duration) {
	g.t.Helper()
	g.settle()
	g.focus(screen.NameField, 5*time.Minute, "name-field-unfocused", "the greeter's name field never had the keyboard focus")
	if err := g.vm.Monitor().Type(user+"\n", keyPause); err != nil {
		g.t.Fatal(err)
	}
	g.focus(screen.PasswordField, within, "name-not-taken", "the greeter did not take the name "+user)
}

// typePassword types a password and Return once the greeter has settled with its
// password field focused, and returns whether PAM refused it (false: the session
// opened). The screen is kept when PAM says nothing.
func (g *graphicalSeat) typePassword(password string) (refused bool) {
	g.t.Helper()
	g.settle()
	g.focus(screen.PasswordField, time.Minute, "password-field-unfocused", "the greeter's password field has no keyboard focus")
	if err := g.vm.Monitor().Type(password+"\n", keyPause); err != nil {
		g.t.Fatal(err)
	}
	g.typed = time.Now()
	m, err := g.vm.Console.Expect(greeterEither, 3*time.Minute)
	if err != nil {
		path, _ := g.keep("password-unanswered")
		g.t.Fatalf("no answer from PAM to the password typed at the greeter (%s): %v", path, err)
	}
	return greeterRefused.MatchString(m[0])
}

// The greeter's session menu on the PC's 1280x800 screen (Debian 12's lightdm-gtk-greeter
// with its default top bar): the session icon near the bar's right end, and the menu it
// drops, one row per session sorted by name, 25 pixels apart.
var (
	sessionIcon = image.Pt(1123, 11)
	sessionRow  = func(i int) image.Point { return image.Pt(1150, 36+25*i) }
)

// chooseSession picks row i (from 0) of the greeter's session menu with the mouse, as a
// person does, once the name is typed and the password asked: the greeter resets the
// choice to the default when a name it does not list is typed (every directory account:
// it lists local users only), so a session picked before the name is lost (seen on a
// booted PC). The keyboard cannot open the menu (the greeter's F9 does nothing in this
// version).
func (g *graphicalSeat) chooseSession(i int) {
	g.t.Helper()
	g.focus(screen.PasswordField, time.Minute, "password-field-unfocused", "the greeter asks for no password")
	tmp := g.t.TempDir()
	before, err := g.vm.Screendump(filepath.Join(tmp, "before.png"))
	if err != nil {
		g.t.Fatal(err)
	}
	size := before.Bounds().Size()
	if err := g.vm.Monitor().Click(sessionIcon, size); err != nil {
		g.t.Fatal(err)
	}
	bootlab.Eventually(g.t, "the greeter's session menu open", time.Minute, func() bool {
		now, err := g.vm.Screendump(filepath.Join(tmp, "menu.png"))
		return err == nil && vmtest.Changed(before, now) > 2000
	})
	g.settle()
	g.shot("session-menu")
	if err := g.vm.Monitor().Click(sessionRow(i), size); err != nil {
		g.t.Fatal(err)
	}
	g.settle()
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
	g.waitText("wrong-password", refusedWords, "the greeter's words for a wrong password")
	for _, s := range g.sessions() {
		if s.User == "student" && s.Type == "x11" {
			t.Fatalf("a wrong password started a session: %+v", s)
		}
	}

	// The right one, into the field the greeter left for it.
	g.enterPassword("student", "ldap-pw")
	g.waitXfce("session")
	return g
}

// waitXfce waits until the student's X11 session is active and is Xfce (xfdesktop runs,
// no course VM does), drawn on the screen, which is kept as NAME.png.
func (g *graphicalSeat) waitXfce(name string) {
	g.t.Helper()
	g.waitSession("student's X11 session on seat0", "student", "user", 5*time.Minute)
	bootlab.Eventually(g.t, "Xfce's desktop running as student, no course VM", desktopWithin, func() bool {
		out, err := g.vm.Console.Run("pgrep -u student -x xfdesktop >/dev/null && ! pgrep -u student -f qemu-system >/dev/null && echo XFCE-ONLY", time.Minute)
		return err == nil && strings.Contains(out, "XFCE-ONLY")
	})
	g.waitDrawn(name, desktopWithin)
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
	g.waitNotifications(2, "two notifications (the switch, the logout)")
	g.shot("notifications")
	if err := g.vm.Console.Send("exit"); err != nil {
		t.Fatal(err)
	}
	expect(`logged out abandoned sessions[^\n]*\(student\)`, 4*time.Minute)
}

// checkCountdown: a forced switch while the student's session runs: the agent tells
// the session (its journal line), and the countdown is a notification window on the
// screen. The student is logged in on the console.
func checkCountdown(t *testing.T, g *graphicalSeat, expect func(string, time.Duration)) {
	expect(`telling logged-in users[^\n]*This PC restarts at`, 3*time.Minute)
	g.waitNotifications(1, "the countdown's notification")
	g.keep("countdown")
}

// waitNotifications waits (2 minutes) until at least n desktop notifications are on the
// student's screen; the test fails naming what was awaited, with the window tree.
func (g *graphicalSeat) waitNotifications(n int, what string) {
	g.t.Helper()
	var tree string
	if !poll.Wait(2*time.Minute, func() bool {
		var err error
		tree, err = g.windows()
		return err == nil && notifications(tree) >= n
	}) {
		g.t.Fatalf("no %s on the student's screen:\n%s", what, tree)
	}
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
// the X screen, and the screen shows what the VM draws); when the VM ends, so does the
// session, and the greeter is back. The student is logged in on the console.
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
		if err != nil {
			return false
		}
		share = vmtest.Share(img, courseVMRed, 8)
		return share >= 0.9
	}) {
		path, _ := g.keep("course-vm")
		t.Fatalf("the course VM's screen: %.0f%% of the PC's screen is its red (%s)", share*100, path)
	}
	t.Logf("the course VM fills the screen: %s, %.0f%% its red", strings.TrimSpace(qemu), share*100)
	g.keep("course-vm")
	// A notice for the student shows over the VM: the agent's countdown and logout
	// warnings reach a session as desktop notifications on the user's bus, as this one
	// sent from the student's console does. The notification window is on the screen
	// and covers some of the VM's red.
	if _, err := g.vm.Console.Run(`DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$(id -u)/bus notify-send -t 300000 'Overtime' 'A notice over the course VM'`, time.Minute); err != nil {
		t.Fatal(err)
	}
	var tree string
	if !poll.Wait(3*time.Minute, func() bool {
		var err error
		if tree, err = g.windows(); err != nil || notifications(tree) < 1 {
			return false
		}
		img, err := g.vm.Screendump(tmp)
		if err != nil {
			return false
		}
		share = vmtest.Share(img, courseVMRed, 8)
		return share < 0.995
	}) {
		path, _ := g.keep("course-vm-no-notice")
		t.Fatalf("no notice over the course VM (%.1f%% of the screen its red, %s):\n%s", share*100, path, tree)
	}
	g.keep("course-vm-notice")
	// The VM ends (QEMU stopped): the session ends with it, the greeter is back.
	if _, err := g.vm.Console.Run("pkill -TERM -u student -f '^/usr/bin/qemu-system-x86_64 '", time.Minute); err != nil {
		t.Fatal(err)
	}
	g.noSession("student's course VM session ended with the VM", "student", 3*time.Minute)
	g.waitSession("the greeter back after the VM", "lightdm", "greeter", greeterWithin)
}

// directoryDown is the console prompt's line when the PC cannot reach the university's
// directory (node-agent/seat: agetty shows it above "login:"). The journal's copy of the
// agent's log line ends in a quote, not a line end.
var directoryDown = regexp.MustCompile(`The university directory \([^)]*\) cannot be reached from this PC: logins with university accounts will fail until it answers\.\r?\n[\s\S]*?login: `)

// refusedWords are words of what the greeter says to a refused password ("Your password
// is incorrect. Please try again.", under its fields).
var refusedWords = regexp.MustCompile(`(?i)is incorrect`)

// waitText waits until the screen's words (screen.Text) match want, and keeps the screen
// as NAME.png; when they do not within a minute, the test fails with what and the words
// it read.
func (g *graphicalSeat) waitText(name string, want *regexp.Regexp, what string) {
	g.t.Helper()
	var text string
	tmp := filepath.Join(g.t.TempDir(), "text.png")
	if !poll.Wait(time.Minute, func() bool {
		img, err := g.vm.Screendump(tmp)
		if err != nil {
			return false
		}
		text, err = screen.Text(img)
		return err == nil && want.MatchString(text)
	}) {
		path, _ := g.keep(name + "-unseen")
		g.t.Fatalf("%s: the screen (%s) reads %q", what, path, text)
	}
	g.keep(name)
	g.t.Logf("%s: %q", what, text)
}

// checkDirectoryNotice: the university's directory goes off the network while the PC
// runs (the student logged in on the console). Within the agent's recheck (30 s) the PC
// says so: its seat status, the console's prompt after the student logs out, and the
// greeter as soon as someone types a name there (pam_echo of the notice, read from the
// screen) — instead of a login that fails without a word.
func checkDirectoryNotice(t *testing.T, g *graphicalSeat, pc *desktopPC) {
	pc.directory.Close()
	bootlab.Eventually(t, "desk1's seat status saying the directory is down", 2*time.Minute, func() bool {
		out, err := g.vm.Console.Run("cat /run/overtime/seat.status", time.Minute)
		return err == nil && strings.Contains(out, "cannot be reached")
	})
	if err := g.vm.Console.Send("exit"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.vm.Console.Expect(directoryDown, 2*time.Minute); err != nil {
		t.Fatalf("the console's prompt with the directory down: %v", err)
	}
	g.typeNameAnsweredWithin("student", 4*time.Minute)
	g.waitText("directory-down", directoryDownWords, "the greeter's notice of the directory down")
}

// directoryDownWords are words of the directory's notice as the greeter shows it (its
// label may wrap the line anywhere).
var directoryDownWords = regexp.MustCompile(`(?s)university directory.*cannot be.*reached`)
