# shellcheck shell=sh
# desktop-minimal: a root that boots the same on every PC and keeps nothing (run by
# images/build.sh with the root directory as $1, outside the chroot).
root=$1

# The host name comes from the boot (the initramfs sets the site manager's name for the
# PC, overtime.host=); an /etc/hostname (mmdebstrap copies the build host's) would
# override it on every PC.
rm -f "${root}/etc/hostname"
# Name resolution: the initramfs writes the DHCP servers to /run/overtime/resolv.conf.
ln -sf /run/overtime/resolv.conf "${root}/etc/resolv.conf"

# Nothing downloads or rebuilds state at each boot of a stateless PC: the image is
# rebuilt and published instead.
for unit in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer; do
	ln -sf /dev/null "${root}/etc/systemd/system/${unit}"
done

# Logs live in memory (a stateless root has nowhere to keep them); the site's log server
# gets them through the agent's journald output or a forwarder the site adds.
mkdir -p "${root}/etc/systemd/journald.conf.d"
cat >"${root}/etc/systemd/journald.conf.d/overtime.conf" <<'CONF'
# Overtime desktop: the journal lives in /run (the root is a tmpfs overlay anyway).
[Journal]
Storage=volatile
RuntimeMaxUse=64M
CONF

# The node agent's unit is enabled by its package; the guest's slice and libvirt too.
# Root has no password: administrators log in through the site's directory (sssd) or
# with the maintenance mode.
chroot "${root}" passwd -l root >/dev/null

# A pool PC is the next person's as soon as the last one logs out: logind ends what the
# session left running (KillUserProcesses) and stops the user's systemd manager at once
# instead of 10 s later (UserStopDelaySec); until it stops, it holds the user's home
# (pam_mount counts it as a session), so the home stays mounted.
mkdir -p "${root}/etc/systemd/logind.conf.d"
cat >"${root}/etc/systemd/logind.conf.d/overtime.conf" <<'CONF'
# Overtime desktop: nothing of a user outlives their last logout.
[Login]
KillUserProcesses=yes
UserStopDelaySec=0
CONF
