package guest

import "testing"

func TestInitError(t *testing.T) {
	for _, tc := range []struct{ console, want string }{
		{"", ""},
		{"[    1.2] Run /init as init process\nguest-init: configuration from /dev/vdb\n", ""},
		// The last reason, without the console's carriage returns.
		{"guest-init: ERROR: first\r\nguest-init: ERROR: cluster storage 10.0.0.9:/export/home at /home: mount failed: mount.nfs: Connection refused \r\n[   42.0] reboot: Power down\r\n",
			"cluster storage 10.0.0.9:/export/home at /home: mount failed: mount.nfs: Connection refused"},
		// No line end: the console was cut off after the reason.
		{"guest-init: ERROR: no munge key at /run/secrets/munge.key", "no munge key at /run/secrets/munge.key"},
		// Another program's "ERROR" is not the init's.
		{"slurmd: ERROR: something\n", ""},
	} {
		if got := InitError([]byte(tc.console)); got != tc.want {
			t.Errorf("InitError(%q) = %q, want %q", tc.console, got, tc.want)
		}
	}
}
