# shellcheck shell=sh
# desktop-minimal: the user's home at login (docs/desktop.md "Homes"). pam_mount mounts
# it from the site's file server when overtime-seat.service has written a volume into
# /etc/security/pam_mount.conf.xml (the image's own, from libpam-mount, has none: then
# pam_mount does nothing). Whatever happens there, the login goes on: every line is
# optional. pam_mkhomedir comes after pam_mount, so that a mounted home is not shadowed
# and, when the mount failed or no homes are configured, it makes a temporary home in
# the PC's memory (umask 0077: only the user reads it; the RAM overlay is gone at the
# next boot). Then seat-home-notice (package overtime-agent) tells the user when their
# home should have come from the file server and did not.
#
# One pam-auth-update profile holds the three in this order, instead of libpam-mount's
# and mkhomedir's own, whose order would follow their priorities; the check below fails
# the build if common-session says otherwise.
root=$1
cat >"${root}/usr/share/pam-configs/overtime-homes" <<'PAM'
Name: Overtime: homes from the site's file server (pam_mount), else a temporary home
Default: yes
Priority: 0
Auth-Type: Additional
Auth:
	optional	pam_mount.so
Session-Type: Additional
Session-Interactive-Only: yes
Session:
	optional	pam_mount.so
	optional	pam_mkhomedir.so umask=0077
	optional	pam_exec.so stdout quiet /usr/lib/overtime/seat-home-notice
PAM
for profile in libpam-mount mkhomedir; do
	if [ -e "${root}/usr/share/pam-configs/${profile}" ]; then
		chroot "${root}" pam-auth-update --disable "${profile}"
	fi
done
chroot "${root}" pam-auth-update --enable overtime-homes

# pam_mount, then pam_mkhomedir, then the notice: once each, in this order.
order=$(grep -v '^[[:space:]]*#' "${root}/etc/pam.d/common-session" |
	grep -o -e 'pam_mount\.so' -e 'pam_mkhomedir\.so' -e 'seat-home-notice' | tr '\n' ' ')
if [ "${order}" != "pam_mount.so pam_mkhomedir.so seat-home-notice " ]; then
	echo "30-homes.sh: /etc/pam.d/common-session has \"${order}\", want pam_mount.so pam_mkhomedir.so seat-home-notice" >&2
	exit 1
fi
# pam_mount's auth hook keeps the password for a cifs mount.
grep -q '^[^#]*pam_mount\.so' "${root}/etc/pam.d/common-auth" || {
	echo "30-homes.sh: pam_mount is not in /etc/pam.d/common-auth" >&2
	exit 1
}
