# shellcheck shell=sh
# bench-desktop and bench-seat (benchmarks only, never published): root logs in on the serial console
# without a password. systemd starts serial-getty@ttyS0 for console=ttyS0; this drop-in
# makes its agetty log root in (login -f: no password, the locked one stays locked).
root=$1
mkdir -p "${root}/etc/systemd/system/serial-getty@ttyS0.service.d"
cat >"${root}/etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf" <<'CONF'
# Benchmark images only: passwordless root on ttyS0 for test/bench/images and the seat benchmark.
[Service]
ExecStart=
ExecStart=-/sbin/agetty --autologin root --noclear --keep-baud 115200,57600,38400,9600 - $TERM
CONF
