# shellcheck shell=sh
# desktop: the course VM player starts with every graphical session (XDG autostart, which
# Xfce honours) as the user at the PC; outside course-vm modes it idles. It shows the
# course VM full screen when the node agent names one (docs/course-vms.md).
root=$1
mkdir -p "${root}/etc/xdg/autostart"
cat >"${root}/etc/xdg/autostart/overtime-course-vm.desktop" <<'DESKTOP'
[Desktop Entry]
Type=Application
Name=Overtime course VM
Comment=Shows the course VM full screen in course-vm time slots
Exec=/usr/bin/overtime-agent course-vm --display gtk
NoDisplay=true
X-GNOME-Autostart-enabled=true
DESKTOP

# KVM for the user at the seat (logind's uaccess), as for a sound card: without it the
# player falls back to TCG.
mkdir -p "${root}/etc/udev/rules.d"
echo 'KERNEL=="kvm", TAG+="uaccess"' >"${root}/etc/udev/rules.d/70-overtime-kvm.rules"

# The display manager starts the graphical target at boot.
ln -sf /lib/systemd/system/graphical.target "${root}/etc/systemd/system/default.target"
