# shellcheck shell=sh
# desktop: LightDM's greeter asks for a user name and a password (the university's
# accounts are not listed: a pool has thousands, and listing them would show every
# student's name to whoever sits down), offers no guest session, and starts Xfce unless
# the person picks another session. Its session menu lists what a student can use:
# Xfce and, in a course slot, the course VM; LightDM's "Default Xsession" (the user's own
# ~/.xsession, a leftover of single-user machines) is taken out. docs/desktop.md "At the
# PC".
root=$1
mkdir -p "${root}/etc/lightdm/lightdm.conf.d"
cat >"${root}/etc/lightdm/lightdm.conf.d/50-overtime.conf" <<'CONF'
# Overtime desktop (images/recipes/desktop/customize.d/30-lightdm.sh).
[Seat:*]
greeter-hide-users=true
greeter-show-manual-login=true
allow-guest=false
user-session=xfce
CONF
rm -f "${root}/usr/share/xsessions/lightdm-xsession.desktop"
