# shellcheck shell=sh
# desktop-minimal: PAM and NSS ask sssd (packages libnss-sss, libpam-sss); sssd itself
# starts only when /etc/sssd/sssd.conf exists (its unit's condition), which
# overtime-seat.service writes at boot, before sssd, from the site's desktopLogin
# (docs/desktop.md "Logins").
root=$1
grep -q '^passwd:.*sss' "${root}/etc/nsswitch.conf" || sed -i 's/^\(passwd\|group\|shadow\):\(.*\)$/\1:\2 sss/' "${root}/etc/nsswitch.conf"
# Homes (pam_mount, pam_mkhomedir) are 30-homes.sh's.
chroot "${root}" pam-auth-update --enable sss 2>/dev/null || chroot "${root}" pam-auth-update --package
# sssd's socket-activated responders need sssd.conf too: without it, every boot would
# report their sockets' dependency failed. sssd.service, once configured, starts the
# responders its configuration names.
rm -f "${root}"/etc/systemd/system/sockets.target.wants/sssd-*.socket \
	"${root}"/etc/systemd/system/sssd.service.wants/sssd-*.socket
