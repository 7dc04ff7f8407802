# shellcheck shell=sh
# desktop: the greeter says why university logins cannot work on this PC (no directory
# configured, a secret missing, the directory unreachable): overtime-seat.service writes
# the reason to /run/overtime/seat.notice, and pam_echo shows it as the greeter's message
# when someone starts to log in (docs/desktop.md "At the PC"). Optional, and without the
# file (logins work) pam_echo shows nothing.
root=$1
f="${root}/etc/pam.d/lightdm"
[ -f "${f}" ] || {
	echo "desktop: ${f} missing (lightdm not installed?)" >&2
	exit 1
}
grep -q 'pam_echo.so file=/run/overtime/seat.notice' "${f}" ||
	sed -i '1a auth    optional        pam_echo.so file=/run/overtime/seat.notice' "${f}"
