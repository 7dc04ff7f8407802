# shellcheck shell=sh
# desktop: the course VM is a session of its own, not a program of every session. In a
# course slot the site manager's seat configuration (overtime-seat.service, at boot) adds
# /usr/share/xsessions/overtime-course-vm.desktop, whose program is the player
# (`overtime-agent course-vm --session`), and makes it LightDM's default; a student who
# picks the Linux desktop instead gets the desktop without the VM on top. Nothing of it is
# in the image (docs/course-vms.md, docs/desktop.md "Sessions").
root=$1

# KVM for the user at the seat (logind's uaccess), as for a sound card: without it the
# player falls back to TCG.
mkdir -p "${root}/etc/udev/rules.d"
echo 'KERNEL=="kvm", TAG+="uaccess"' >"${root}/etc/udev/rules.d/70-overtime-kvm.rules"

# The display manager starts the graphical target at boot.
ln -sf /lib/systemd/system/graphical.target "${root}/etc/systemd/system/default.target"
