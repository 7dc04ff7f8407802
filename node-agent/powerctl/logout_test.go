package powerctl

import "testing"

// Only a person's local graphical session is ended: not a greeter, a text console, an
// ssh login, or one already closing.
func TestGraphicalUser(t *testing.T) {
	for out, want := range map[string]bool{
		"Id=2\nName=student\nClass=user\nType=x11\nRemote=no\nState=active\n":     true,
		"Id=3\nName=student\nClass=user\nType=wayland\nRemote=no\nState=online\n": true,
		"Id=c1\nName=lightdm\nClass=greeter\nType=x11\nRemote=no\nState=active\n": false,
		"Id=4\nName=student\nClass=user\nType=tty\nRemote=no\nState=active\n":     false,
		"Id=5\nName=student\nClass=user\nType=x11\nRemote=yes\nState=active\n":    false,
		"Id=6\nName=student\nClass=user\nType=x11\nRemote=no\nState=closing\n":    false,
		"": false,
	} {
		if got := graphicalUser(parseSession(out)); got != want {
			t.Errorf("graphicalUser(%q) = %v, want %v", out, got, want)
		}
	}
}
