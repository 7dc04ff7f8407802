#!/usr/bin/env bash
# make demo / make demo-stop. Builds the real images (make images FLAVOUR="desktop
# compute-guest": the graphical desktop, Debian 12 with Xfce and LightDM, and the compute
# guest, with this checkout's packages), then starts a complete boot server in a network
# namespace (overtime-demo): a throwaway slapd with the Overtime schema, a second one
# playing the university's directory (ldaps, a POSIX account "student"), `overtime serve`
# (API, image store, boot scripts, kernels over HTTP, the desktops' login secrets) and
# `overtime bootserver run` (dnsmasq + nfs-ganesha, image sync), applies
# docs/examples/site.yaml with the seat's desktopLogin, publishes both images with
# `overtime image publish --dir`, and PXE-boots the pool PC pc-a01 as a QEMU VM with a VGA
# card: the desktop image from NFS, its packaged node agent with the credential from the
# PC's OVERTIME-ID disk, the compute guest in a container, throttled when keys are
# pressed. It ends at pc-a01's screen: LightDM's greeter, and the student logging in.
# The API is forwarded to 127.0.0.1. Everything lives in $OVERTIME_DEMO_DIR and the
# namespace, and is removed on stop.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
D=${OVERTIME_DEMO_DIR:-/tmp/overtime-demo}
# The site manager's clock: a Wednesday afternoon, so that pc-a01 boots the desktop
# and its node agent harvests (OVERTIME_DEMO_NOW=now for the real clock).
OVERTIME_DEMO_NOW=${OVERTIME_DEMO_NOW:-2026-12-02T14:30:00+01:00}
[ "$OVERTIME_DEMO_NOW" != now ] || OVERTIME_DEMO_NOW=
NS=overtime-demo
HTTP_PORT=${OVERTIME_DEMO_PORT:-8080}
BIN=$ROOT/bin/overtime
AGENT=$ROOT/bin/overtime-agent
DEV=$ROOT/bin/overtime-dev # the development tools: a throwaway slapd, the port forward
SERVER_IP=10.20.0.1
API=http://$SERVER_IP:8080

inns() { ip netns exec "$NS" "$@"; }

stop() {
	if [ ! -d "$D" ] && ! ip netns list | grep -qw "$NS"; then
		echo "demo: not running"; return 0
	fi
	for f in "$D/vm.pid" "$D/forward.pid" "$D/bootserver.pid" "$D/serve.pid" "$D/slapd/slapd.pid" \
		"$D/uni-forward.pid" "$D/uni/slapd/slapd.pid"; do
		[ -s "$f" ] || continue
		pid=$(cat "$f")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	done
	if ip netns list | grep -qw "$NS"; then
		for pid in $(ip netns pids "$NS"); do kill -9 "$pid" 2>/dev/null || true; done
		ip netns del "$NS"
	fi
	rm -rf "$D"
	echo "demo: stopped and removed $D and the network namespace $NS"
}

# poll with a deadline instead of sleeping a guessed time
wait_for() { # DESCRIPTION SECONDS COMMAND...
	local what=$1 deadline=$((SECONDS + $2)); shift 2
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $deadline ] || { echo "demo: timed out waiting for $what"; return 1; }
		sleep 0.2
	done
}

start() {
	if [ -e "$D/serve.pid" ] || ip netns list | grep -qw "$NS"; then
		echo "demo: already running (make demo-stop first)"; exit 1
	fi
	[ "$(id -u)" -eq 0 ] || { echo "demo: needs root (network namespaces, QEMU taps)"; exit 1; }
	mkdir -p "$D" && chmod 755 "$D"
	trap 'echo; stop; exit 130' INT TERM
	trap 'rc=$?; [ $rc -eq 0 ] || { echo "demo: failed, cleaning up"; stop; }' EXIT

	echo "== make images: desktop (Xfce, LightDM) and compute-guest (Debian 12 + this checkout's .debs; cached in /var/cache/overtime/images)"
	# zstd level 3: a demo's image is read once; level 15 would spend most of a cold
	# build squashing (docs/benchmarks/images.md).
	if ! OVERTIME_SQUASHFS_LEVEL=${OVERTIME_SQUASHFS_LEVEL:-3} make -s -C "$ROOT" images FLAVOUR="desktop compute-guest" > "$D/images.log" 2>&1; then
		tail -30 "$D/images.log"; echo "demo: make images failed (log: $D/images.log)"; exit 1
	fi
	IMG=$ROOT/bin/images
	du -h "$IMG"/desktop/root.squashfs "$IMG"/compute-guest/root.squashfs | sed 's/^/   /'

	echo "== network namespace $NS: bridge br0 $SERVER_IP/24, tap0 for the VM"
	ip netns add "$NS"
	inns ip link set lo up
	inns ip link add br0 type bridge forward_delay 0 stp_state 0
	inns ip addr add "$SERVER_IP/24" dev br0
	inns ip link set br0 up
	inns ip tuntap add dev tap0 mode tap
	inns ip link set tap0 master br0
	inns ip link set tap0 up

	ROOTPW=demo-root-secret
	inns "$DEV" slapd --dir "$D/slapd" --port 389 --root-password "$ROOTPW" > "$D/ldap.env"
	set -a; . "$D/ldap.env"; set +a
	export OVERTIME_LDAP_PASSWORD=$ROOTPW OVERTIME_ADMIN_PASSWORD=admin-secret
	inns "$BIN" ldap init --site example --timezone Europe/Berlin --admin admin
	uni_directory || exit 1

	# The image store of the site manager, which is also what the boot server exports (one
	# machine plays both).
	mkdir -p "$D/images" "$D/files" && chmod 755 "$D/images" "$D/files"
	NOW_ARGS=()
	[ -z "${OVERTIME_DEMO_NOW:-}" ] || NOW_ARGS=(--now "$OVERTIME_DEMO_NOW")
	start_serve "${NOW_ARGS[@]}"
	"$DEV" forward --netns "$NS" --listen "127.0.0.1:$HTTP_PORT" --to "$SERVER_IP:8080" > "$D/forward.log" 2>&1 &
	echo $! > "$D/forward.pid"
	wait_for "overtime serve" 20 curl -fsS "http://127.0.0.1:$HTTP_PORT/healthz"

	export OVERTIME_SERVER=http://127.0.0.1:$HTTP_PORT OVERTIME_USER=admin OVERTIME_PASSWORD=admin-secret
	echo "== overtime site apply -f docs/examples/site.yaml, with the seat's desktopLogin (the university directory)"
	# The example site plus the demo's desktopLogin: logins at the PCs from the university
	# directory over ldaps, trusting the demo's CA ($D/site.yaml).
	{
		cat docs/examples/site.yaml
		printf '%s\n' "desktopLogin:" "  provider: ldap" "  uris: [ldaps://$SERVER_IP:636]" "  searchBase: $UNI_BASE" \
			"  bindDN: $UNI_SERVICE_DN" "  caCert: |"
		sed 's/^/    /' "$D/uni/ca.pem"
	} > "$D/site.yaml"
	"$BIN" site apply -f "$D/site.yaml"
	for u in alice bob carol dave; do
		OVERTIME_NEW_PASSWORD="$u-secret" "$BIN" user add "$u" >/dev/null
	done
	OVERTIME_NEW_PASSWORD=bootsrv-secret "$BIN" user add bootsrv >/dev/null
	"$BIN" role add bs1-sync --role boot-server --boot-server bs1 --member bootsrv >/dev/null

	echo "== the demo network: boot server bs1 on br0, images under $D/images"
	"$BIN" bootserver set bs1 --interface br0 --nfs-root "$D/images" >/dev/null
	echo "== overtime image publish --dir: the builds are verified, uploaded into the store and made current"
	"$BIN" image publish debian-desktop demo-1 --dir "$IMG/desktop" 2>&1 | grep -v '^uploading' | sed 's/^/   /'
	"$BIN" image publish compute-guest demo-1 --dir "$IMG/compute-guest" 2>&1 | grep -v '^uploading' | sed 's/^/   /'
	"$BIN" image current debian-desktop demo-1 >/dev/null
	"$BIN" image current compute-guest demo-1 >/dev/null
	for m in desktop cluster course-bio101 maintenance; do
		args=$("$BIN" mode show "$m" -o json | sed -n 's/.*"kernelArgs": "\(.*\)".*/\1/p')
		"$BIN" mode set "$m" --kernel-args "console=ttyS0${args:+ $args}" >/dev/null
	done
	# The desktop mode's compute guest: the compute-guest image in a container, busy with a
	# CPU-bound loop (the Slurm part below runs real jobs in a cluster of its own).
	printf '%s\n' "image: compute-guest" "backend: container" "network: none" \
		"vcpus: 1" "memoryMB: 256" "kernelArgs: /bin/busybox md5sum /dev/zero" > "$D/guest.yaml"
	"$BIN" mode set desktop --guest-file "$D/guest.yaml" >/dev/null
	printf '%s\n' "idleAfter: 20s" "hold: 5s" "throttleCPU: 25" "desktopLoad: 100" "freezePressure: 95" > "$D/policy.yaml"
	"$BIN" pool set lab-a --policy-file "$D/policy.yaml" >/dev/null
	# pc-a01 has no TPM: its host credential goes on a small local disk labelled OVERTIME-ID.
	"$BIN" host credential pc-a01 --out "$D/pc-a01.token" >/dev/null
	mkdir -p "$D/id" && install -m 600 "$D/pc-a01.token" "$D/id/agent.token"
	mkfs.ext4 -q -L OVERTIME-ID -E root_owner=0:0 -d "$D/id" "$D/pc-a01-id.img" 8M >/dev/null

	echo "== overtime bootserver run --name bs1 --nfs ganesha   (dnsmasq + nfs-ganesha, in $NS)"
	# A private /run: rpcbind's socket must not meet another rpcbind's.
	OVERTIME_SERVER=$API OVERTIME_USER=bootsrv OVERTIME_PASSWORD=bootsrv-secret \
		inns unshare --mount --propagation private sh -c 'mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -p /run/rpcbind && exec "$0" "$@"' \
		"$BIN" bootserver run --name bs1 --nfs ganesha --state-dir "$D/bootserver" --tftp-root "$D/tftp" \
		--export-root "$D/images" --refresh 2s > "$D/bootserver.log" 2>&1 &
	echo $! > "$D/bootserver.pid"
	wait_for "dnsmasq and nfs-ganesha" 60 grep -q "NFS SERVER INITIALIZED" "$D/bootserver/ganesha.log"
	if ! wait_for "bs1 to verify debian-desktop demo-1" 180 sh -c '"$0" image show debian-desktop -o json | grep -q "\"verifiedOn\""' "$BIN"; then
		tail -20 "$D/bootserver.log"; exit 1
	fi
	echo "== overtime image show debian-desktop   (the boot server verified the published version)"
	"$BIN" image show debian-desktop | sed 's/^/   /'

	echo
	echo "== overtime mode-at pc-a01   (what the schedule says now)"
	"$BIN" mode-at pc-a01 ${OVERTIME_DEMO_NOW:+"$OVERTIME_DEMO_NOW"}
	MODE=$("$BIN" mode-at pc-a01 ${OVERTIME_DEMO_NOW:+"$OVERTIME_DEMO_NOW"} | awk 'NR==1{print $1}')

	echo
	echo "== power on pc-a01 (52:54:00:0a:00:01): PXE boot in QEMU, serial console -> $D/pc-a01.log, a VGA screen"
	# TCG unless told otherwise: on these machines /dev/kvm opens but guests make no
	# progress (internal/testenv/vmtest probes it properly for the tests). sercon-port makes
	# SeaBIOS and iPXE print on the serial console (value: 0x3f8, little-endian).
	printf '\xf8\x03' > "$D/sercon-port"
	inns qemu-system-x86_64 -name pc-a01 -machine q35 -accel "${OVERTIME_DEMO_ACCEL:-tcg}" -m 2048 -smp 2 -nodefaults -no-user-config \
		-display none -device VGA -boot n -fw_cfg name=etc/sercon-port,file="$D/sercon-port" \
		-netdev tap,id=net0,ifname=tap0,script=no,downscript=no \
		-device virtio-net-pci,netdev=net0,mac=52:54:00:0a:00:01,bootindex=1 \
		-drive file="$D/pc-a01-id.img",format=raw,if=virtio,readonly=on \
		-chardev socket,id=con0,path="$D/pc-a01.console",server=on,wait=off,logfile="$D/pc-a01.log" \
		-serial chardev:con0 -monitor unix:"$D/pc-a01.monitor",server=on,wait=off > "$D/qemu.log" 2>&1 &
	echo $! > "$D/vm.pid"
	t0=$SECONDS
	if ! wait_for "pc-a01 to boot Debian" 900 grep -q "Welcome to" "$D/pc-a01.log"; then
		tail -30 "$D/pc-a01.log"; exit 1
	fi
	echo "   systemd started $((SECONDS - t0)) s after power-on. The console, filtered:"
	tr -d '\r' < "$D/pc-a01.log" | grep -aoE "Overtime: pc-a01 mode .*|overtime: .*|Welcome to .*" | sed 's/^/   | /'
	if ! grep -aq "Overtime: pc-a01 mode $MODE" "$D/pc-a01.log"; then
		echo "demo: pc-a01 did not land in the scheduled mode $MODE"; exit 1
	fi
	echo "   pc-a01 landed in mode $MODE, as the schedule says."

	if [ "$MODE" = desktop ]; then
		agent_demo || exit 1
	else
		echo "   (the node agent part of the demo needs desktop mode: set OVERTIME_DEMO_NOW to a lecture slot)"
	fi

	if [ "$MODE" = desktop ]; then
		switch_demo || exit 1
	fi
	slurm_demo || exit 1
	reservation_demo || exit 1
	powersave_demo || exit 1
	interference_demo || exit 1
	ui_demo || exit 1
	seat_demo || exit 1

	cat <<EOT

Overtime demo is running (state in $D, network namespace $NS).

  Web UI                 http://127.0.0.1:$HTTP_PORT/ui/   (log in as any user below; docs/admin-guide.md, docs/lecturer-guide.md)
  API and boot scripts   http://127.0.0.1:$HTTP_PORT   (in the namespace: $API; OpenAPI: docs/api/openapi.yaml)
  Metrics                http://127.0.0.1:$HTTP_PORT/metrics   (Grafana dashboards: docs/grafana/)
  LDAP                   $OVERTIME_LDAP_URL inside $NS, base $OVERTIME_LDAP_BASE
  University directory   ldaps://$SERVER_IP:636 inside $NS, base $UNI_BASE (CA $D/uni/ca.pem): student / student-pw
  Users (password = <uid>-secret, admin: admin-secret)
      admin  site admin          alice  pool admin lab-a     bob   pool admin lab-b
      carol  lecturer lab-a      dave   viewer               bootsrv  boot-server bs1 (its image sync)
  pc-a01 console log     $D/pc-a01.log   (the desktop image has no console login: root is locked)
  pc-a01 screen          bin/overtime-dev screen dump --monitor $D/pc-a01.monitor $D/now.png   (and: screen type, screen key)

Try (in another shell):
  export OVERTIME_SERVER=http://127.0.0.1:$HTTP_PORT OVERTIME_USER=admin OVERTIME_PASSWORD=admin-secret
  bin/overtime host list
  bin/overtime mode-at pc-a05 '2026-12-05 23:00'
  bin/overtime agent status pc-a01       # its node agent's last heartbeat
  bin/overtime host reboot pc-a01 --reason "new driver"   # its agent restarts it (nobody logged in)
  bin/overtime host power-status; bin/overtime audit      # commands and who did what
  bin/overtime image show debian-desktop # versions, where each is verified, what keeps it
  bin/overtime schedule add --host pc-a01 'daily 00:00-24:00 maintenance'   # then reset pc-a01:
  echo system_reset | socat - UNIX-CONNECT:$D/pc-a01.monitor; tail -f $D/pc-a01.log
  bin/overtime render dnsmasq            # also: dnsmasq-hosts slurm ganesha exports
  curl http://127.0.0.1:$HTTP_PORT/boot/ipxe/52:54:00:0a:00:01
  curl http://127.0.0.1:$HTTP_PORT/pxelinux.cfg/01-52-54-00-0b-00-01
  OVERTIME_USER=bob OVERTIME_PASSWORD=bob-secret bin/overtime host delete pc-a01   # refused: lab-a is not bob's

Stop with: make demo-stop$( [ -t 0 ] && echo " (or Ctrl-C here)")
EOT
	trap - EXIT
	if [ -t 0 ] && [ -z "${OVERTIME_DEMO_DETACH:-}" ]; then
		# Stay in the foreground so that Ctrl-C tears everything down.
		tail -n 0 -f "$D/serve.log" &
		wait "$(cat "$D/serve.pid")" || true
		stop
	fi
}

# start_serve [--now T]: overtime serve in the namespace (also to move the site's clock).
# --insecure-http: the demo's PC reaches it over plain HTTP on the demo's own bridge, so
# the desktop's login secrets (and the munge key) go that way too; a site serves TLS
# (docs/node-agent.md "The channel").
start_serve() {
	# ip netns exec execs serve: $! is serve's own PID (a shell function in the background
	# would be a subshell, and killing it would leave serve running).
	ip netns exec "$NS" "$BIN" serve --listen "$SERVER_IP:8080" --boot-server bs1 --reload 5s --menu-timeout 2s \
		--images-dir "$D/images" --files-dir "$D/files" --desktop-secrets "$D/desktop-secrets" --syslinux-dir /usr/lib/syslinux/modules/bios --insecure-http "$@" >> "$D/serve.log" 2>&1 &
	echo $! > "$D/serve.pid"
}

# uni_directory: the university's directory the students log in with, as a campus
# directory the pool does not run: a second throwaway slapd (base dc=uni,dc=example, the
# nis schema's posixAccount and posixGroup) with a certificate from a CA made here, valid
# for the boot server's address, where the PCs reach it over ldaps ($SERVER_IP:636,
# forwarded to the slapd's own ldaps port inside the namespace). The PCs' sssd searches it
# as its service account, whose password is the desktop secret bind-password that
# `overtime serve --desktop-secrets` hands each PC with its login configuration.
UNI_BASE=dc=uni,dc=example
uni_directory() {
	local u=$D/uni
	mkdir -p "$u" && chmod 700 "$u"
	{
		openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 -subj "/CN=Demo University CA" \
			-keyout "$u/ca.key" -out "$u/ca.pem" &&
			openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$SERVER_IP" \
				-keyout "$u/server.key" -out "$u/server.csr" &&
			printf '%s\n' "subjectAltName=IP:$SERVER_IP,IP:127.0.0.1" "extendedKeyUsage=serverAuth" \
				"keyUsage=digitalSignature" "basicConstraints=CA:FALSE" > "$u/server.ext" &&
			openssl x509 -req -in "$u/server.csr" -CA "$u/ca.pem" -CAkey "$u/ca.key" -CAcreateserial -days 7 \
				-extfile "$u/server.ext" -out "$u/server.pem"
	} > "$u/openssl.log" 2>&1 || { cat "$u/openssl.log"; echo "demo: the university's certificates failed"; return 1; }
	local rootpw=uni-root-secret svcpw=uni-service-secret
	inns "$DEV" slapd --dir "$u/slapd" --port 1389 --base-dn "$UNI_BASE" --root-password "$rootpw" \
		--service-password "$svcpw" --tls-cert "$u/server.pem" --tls-key "$u/server.key" --tls-ca "$u/ca.pem" \
		--ldaps-port 1636 > "$u/slapd.env"
	UNI_SERVICE_DN=$(sed -n 's/^SLAPD_SERVICE_DN=//p' "$u/slapd.env")
	inns "$DEV" forward --netns "$NS" --listen "$SERVER_IP:636" --to 127.0.0.1:1636 > "$D/uni-forward.log" 2>&1 &
	echo $! > "$D/uni-forward.pid"
	local hash
	hash=$(slappasswd -s student-pw)
	if ! inns ldapadd -x -H ldap://127.0.0.1:1389 -D "cn=admin,$UNI_BASE" -w "$rootpw" > "$u/ldapadd.log" 2>&1 <<-LDIF
		dn: ou=people,$UNI_BASE
		objectClass: organizationalUnit
		ou: people

		dn: ou=groups,$UNI_BASE
		objectClass: organizationalUnit
		ou: groups

		dn: uid=student,ou=people,$UNI_BASE
		objectClass: inetOrgPerson
		objectClass: posixAccount
		uid: student
		cn: Stu Dent
		givenName: Stu
		sn: Dent
		uidNumber: 1234567
		gidNumber: 1234500
		homeDirectory: /home/student
		loginShell: /bin/bash
		userPassword: $hash

		dn: cn=students,ou=groups,$UNI_BASE
		objectClass: posixGroup
		cn: students
		gidNumber: 1234500
		memberUid: student
	LDIF
	then
		cat "$u/ldapadd.log"; echo "demo: ldapadd into the university directory failed"; return 1
	fi
	# The desktops' login secrets: the service account's password (docs/desktop.md "Logins").
	mkdir -p "$D/desktop-secrets" && chmod 700 "$D/desktop-secrets"
	(umask 077 && printf '%s\n' "$svcpw" > "$D/desktop-secrets/bind-password")
	echo "== the university's directory: ldaps://$SERVER_IP:636, $UNI_BASE (a CA of its own: $u/ca.pem)"
	# What a PC's sssd will see: the service account searching over ldaps, the CA trusted.
	local search=(inns env LDAPTLS_CACERT="$u/ca.pem" ldapsearch -x -LLL -o ldif-wrap=no -H "ldaps://$SERVER_IP:636"
		-D "$UNI_SERVICE_DN" -w "$svcpw" -b "$UNI_BASE")
	wait_for "the university directory over ldaps" 20 "${search[@]}" uid=student uid || return 1
	"${search[@]}" "(|(uid=student)(cn=students))" uidNumber gidNumber homeDirectory memberUid |
		grep -E '^(dn|uidNumber|gidNumber|homeDirectory|memberUid):' | sed 's/^/   | /'
	echo "   student's password (student-pw) is stored hashed; the PCs search as $UNI_SERVICE_DN"
}

# screen: pc-a01's screen and keyboard through its human monitor (overtime-dev screen).
screen() { "$DEV" screen "$1" --monitor "$D/pc-a01.monitor" "${@:2}"; }

# graphical FILE: dump pc-a01's screen to FILE; true if it is a graphical screen (a text
# console or a blank screen has a handful of colours, a greeter or desktop many).
graphical() {
	local n
	n=$(screen dump "$1") && [ "$n" -ge 32 ]
}

# changed_from BEFORE AFTER PIXELS: dump the screen to AFTER; true if more than PIXELS
# pixels differ from BEFORE.
changed_from() { screen dump "$2" >/dev/null && [ "$("$DEV" screen changed "$1" "$2")" -gt "$3" ]; }

# greeter_up FILE: the greeter is on the screen. The X server blanks an untouched screen
# after a while (the demo's Slurm parts take longer): a Shift press, which types nothing,
# wakes it.
greeter_up() {
	graphical "$1" && return 0
	screen key shift >/dev/null 2>&1 || true
	sleep 2
	return 1
}

# settled FILE: the screen is graphical and unchanged over 8 s (drawn completely; a
# blinking cursor is a few dozen pixels).
settled() {
	graphical "$1.1.png" || return 1
	sleep 8
	graphical "$1" && [ "$("$DEV" screen changed "$1.1.png" "$1")" -le 300 ] || return 1
	rm -f "$1.1.png"
}

# focused FIELD: the greeter's FIELD (name, password) has the keyboard focus, read from
# the screen (overtime-dev screen focus): keys typed before the greeter focuses a field go
# nowhere. A Shift press wakes a blanked screen.
focused() {
	screen dump "$D/focus.png" >/dev/null || return 1
	[ "$("$DEV" screen focus "$D/focus.png")" = "$1" ] && return 0
	screen key shift >/dev/null 2>&1 || true
	sleep 1
	return 1
}

# refusals: how many binds the university directory refused (err=49: a wrong password).
refusals() { grep -ac 'RESULT tag=97 err=49' "$D/uni/slapd/slapd.log" || true; }

# seat_demo: the person at pc-a01, as the demo ends: LightDM's greeter on its VGA screen
# (read with QEMU's screendump), a student of the university typing name and password on
# its keyboard (QEMU's sendkey: one key at a time, as a person types), sssd on the PC
# finding the student in the university directory over ldaps and checking the password,
# and the student's Xfce session, which pc-a01's node agent counts in its heartbeat.
seat_demo() {
	echo
	local mode kind
	mode=$(tr -d '\r' < "$D/pc-a01.log" | grep -aoE "Overtime: pc-a01 mode [a-z0-9._-]+" | tail -1 | awk '{print $4}')
	kind=$("$BIN" mode show "$mode" -o json | sed -n 's/.*"kind": "\([^"]*\)".*/\1/p' | head -1)
	echo "== the seat: pc-a01's screen (VGA, read with QEMU's screendump) and keyboard (sendkey), in mode $mode"
	if [ "$kind" != desktop ] && [ "$kind" != course-vm ]; then
		echo "   (no graphical seat in a $kind mode)"; return 0
	fi
	if ! wait_for "LightDM's greeter on pc-a01's screen" 600 greeter_up "$D/greeter.png"; then
		tail -20 "$D/pc-a01.log"; return 1
	fi
	wait_for "the greeter to settle" 120 settled "$D/greeter.png" || return 1
	echo "   LightDM's greeter (no list of users: a name is typed): $D/greeter.png"
	# The greeter focuses its name field when PAM asks for the name; keys pressed at it
	# before (the node agent's part typed "hello" on this keyboard) are selected and
	# deleted first.
	wait_for "the greeter's name field to have the keyboard focus" 300 focused name || return 1
	screen key ctrl-a backspace
	echo "   typing the name student, Return ..."
	screen type --enter student
	if ! wait_for "the greeter to take the name" 120 focused password; then
		echo "   the screen: $D/focus.png"; return 1
	fi
	cp "$D/focus.png" "$D/seat-password.png"
	echo "   ... the greeter asks for the password ($D/seat-password.png); typing student-pw, Return"
	# The student's binds, as the university directory logged them: a refused one (err=49)
	# means the password arrived mangled (under TCG a key can be lost even at this pace;
	# a person types it again, and so does the demo, up to three times).
	local try refused state deadline
	for try in 1 2 3; do
		refused=$(refusals)
		wait_for "the greeter's password field to have the focus" 120 focused password || return 1
		screen type --pause 300ms --enter student-pw
		state='' deadline=$((SECONDS + 300))
		while [ -z "$state" ] && [ $SECONDS -lt $deadline ]; do
			if "$BIN" agent status pc-a01 -o json 2>/dev/null | grep -qE '"sessions": *[1-9]'; then
				state=in
			elif [ "$(refusals)" -gt "$refused" ]; then
				state=refused
			else
				sleep 1
			fi
		done
		[ "$state" != in ] || break
		if [ "$state" != refused ] || [ $try -eq 3 ]; then
			"$BIN" agent status pc-a01 || true
			screen dump "$D/seat-failed.png" >/dev/null || true
			echo "demo: no session for student (the screen: $D/seat-failed.png)"; return 1
		fi
		echo "   the university directory refused the password as it arrived (a key lost on the way?): typing it again"
		sleep 3 # the greeter says so and empties the password field
	done
	echo "   logged in: sssd on pc-a01 found student (uid 1234567) in the university directory over ldaps and"
	echo "   checked the password; pc-a01's agent counts $("$BIN" agent status pc-a01 -o json |
		sed -n 's/.*"sessions": *\([0-9]*\).*/\1/p') session(s) in its heartbeat (a PC is never switched off under a user)"
	# The session's desktop replaces the greeter (most of the screen changes), then settles.
	if ! wait_for "student's Xfce desktop on the screen" 300 changed_from "$D/greeter.png" "$D/session.png" 100000; then
		echo "   the screen: $D/session.png"; return 1
	fi
	wait_for "the session's desktop to settle" 180 settled "$D/session.png" || return 1
	echo "   student's Xfce session: $D/session.png"
}

# switch_demo: pc-a01 follows its schedule by itself. The site's clock is put two minutes
# before a lecture booked for pc-a01 (the course-bio101 mode: a course VM on a freshly
# booted desktop); its node agent learns of the switch, reports it, and restarts the PC at
# the boundary (nobody is logged in) into the lecture.
switch_demo() {
	echo
	echo "== the schedule on a running PC: a lecture for pc-a01 two minutes ahead; nobody touches the PC"
	kill "$(cat "$D/serve.pid")" && wait_for "overtime serve to stop" 20 sh -c '! kill -0 "$0" 2>/dev/null' "$(cat "$D/serve.pid")"
	start_serve --now 2026-12-02T15:48:00+01:00
	wait_for "overtime serve" 20 curl -fsS "http://127.0.0.1:$HTTP_PORT/healthz"
	"$BIN" exception add bio101-demo --kind lecture --description "BIO101 practical" --mode course-bio101 \
		--host pc-a01 --start "2026-12-02 15:50" --end "2026-12-02 17:00" | sed 's/^/   /'
	lines=$(wc -l < "$D/pc-a01.log")
	if ! wait_for "pc-a01's agent to report the coming restart" 180 sh -c '"$0" agent status pc-a01 -o json | grep -q "\"switch\": *\"reboot at .* into course-bio101"' "$BIN"; then
		"$BIN" agent status pc-a01 || true; return 1
	fi
	echo "   pc-a01's agent: $("$BIN" agent status pc-a01 -o json | sed -n 's/.*"switch": *"\([^"]*\)".*/\1/p')"
	if ! wait_for "pc-a01 to boot the lecture" 900 sh -c 'tail -n +"$0" "$1" | grep -aq "Overtime: pc-a01 mode course-bio101"' "$lines" "$D/pc-a01.log"; then
		tail -30 "$D/pc-a01.log"; return 1
	fi
	tail -n +"$lines" "$D/pc-a01.log" | tr -d '\r' | grep -aoE "reboot: Restarting system|Overtime: pc-a01 mode .*" | sed 's/^/   | /'
	echo "   pc-a01 restarted by itself at the boundary and booted the lecture's mode."
}

# slurm_demo: a Slurm pool of one desktop (real slurmctld + munge, the desktop's node agent
# with a container guest running slurmd -Z, overtime-slurm-sync): a batch job runs while
# the owner types, and the user reads its interference report. It runs as the Go test
# TestSlurmDemo (which also checks the report) and is torn down when it ends.
slurm_demo() {
	echo
	echo "== Slurm: a batch job on a desktop node while its owner types; the job's interference report"
	if ! go test -count=1 -timeout 10m -run '^TestSlurmDemo$' -v ./test/ > "$D/slurm-demo.log" 2>&1; then
		tail -40 "$D/slurm-demo.log"; echo "demo: the Slurm part failed (log: $D/slurm-demo.log)"; return 1
	fi
	# The test's narration, without Go's test framing and the daemons' logs.
	sed -n '/== Slurm:/,/^--- PASS/p' "$D/slurm-demo.log" | grep -v -e '^--- PASS' -e '^=== ' |
		sed -e 's/^ *slurm_demo_test.go:[0-9]*: //' -e 's/^/   | /'
}

# powersave_demo: Slurm power saving (TestSlurmPowerSave): a job for a PC that its schedule
# gives to its local disk wakes it (Wake-on-LAN, power-save exception), runs, and the PC is
# given back after SuspendTime; a PC in maintenance is refused.
powersave_demo() {
	echo
	echo "== Slurm power saving: ResumeProgram wakes a local-disk PC for a job, SuspendProgram gives it back"
	if ! go test -count=1 -timeout 10m -run '^TestSlurmPowerSave$' -v ./test/ > "$D/powersave-demo.log" 2>&1; then
		tail -40 "$D/powersave-demo.log"; echo "demo: the power saving part failed (log: $D/powersave-demo.log)"; return 1
	fi
	sed -n '/^=== RUN   TestSlurmPowerSave$/,/^--- PASS/p' "$D/powersave-demo.log" | grep -v -e '^--- PASS' -e '^=== ' -e '^    --- ' |
		sed -e 's/^ *slurm_powersave_test.go:[0-9]*: //' -e 's/^/   | /'
}

# reservation_demo: Slurm is told in advance (TestSlurmReservations): the sync daemon holds
# a maintenance reservation on a node before its course slot, a job whose time limit
# crosses the slot runs on a dedicated node instead, and a job hit by a short-notice exam
# is warned with USR1 and requeued with the reason.
reservation_demo() {
	echo
	echo "== Slurm told in advance: a reservation before a lecture, a warning and a requeue at short notice"
	if ! go test -count=1 -timeout 10m -run '^TestSlurmReservations$' -v ./test/ > "$D/reservation-demo.log" 2>&1; then
		tail -40 "$D/reservation-demo.log"; echo "demo: the reservation part failed (log: $D/reservation-demo.log)"; return 1
	fi
	grep -E '^ *slurm_reservation_test.go:[0-9]+: ' "$D/reservation-demo.log" |
		sed -e 's/^ *slurm_reservation_test.go:[0-9]*: //' -e 's/^/   | /'
}

# vm: type a command on pc-a01's serial console.
vm() { printf '%s\n' "$*" | socat - UNIX-CONNECT:"$D/pc-a01.console" >/dev/null; }

# agent_status FIELD VALUE: does pc-a01's last heartbeat say so?
agent_status() { "$BIN" agent status pc-a01 -o json 2>/dev/null | grep -q "\"$1\": \"$2\""; }

# agent_demo: the packaged node agent on pc-a01 (systemd unit of the desktop image, token
# from the OVERTIME-ID disk) runs the compute guest as a container (crun, cgroup v2 under
# systemd) and throttles it when keys are pressed on pc-a01's keyboard (QEMU's PS/2
# keyboard through the monitor: the agent reads /dev/input/event*). What it does is seen
# from the site manager, in its heartbeats.
agent_demo() {
	echo
	echo "== node agent: desktop mode runs compute-guest as a container; lab-a throttles it on input"
	sed 's/^/   | /' "$D/policy.yaml"
	if ! wait_for "pc-a01's agent to report its guest running" 600 agent_status guestState running; then
		"$BIN" agent status pc-a01 || true; echo "demo: the node agent did not start the guest"; return 1
	fi
	"$BIN" agent status pc-a01 | sed 's/^/   | /'
	echo "   guest running at full speed in its idle cgroup. Pressing keys on pc-a01's keyboard..."
	for k in h e l l o; do echo "sendkey $k" | socat - UNIX-CONNECT:"$D/pc-a01.monitor" >/dev/null; done
	if ! wait_for "the throttle in pc-a01's heartbeat" 90 agent_status action throttle; then
		"$BIN" agent status pc-a01 || true; echo "demo: the guest was not throttled"; return 1
	fi
	"$BIN" agent status pc-a01 | sed 's/^/   | /'
	echo "   throttled on the key press: the adaptive controller (docs/interference.md) starts the guest at"
	echo "   25% of pc-a01's CPUs (throttleCPU: no calibration yet) and raises the cap while the desktop's"
	echo "   measured slowdown stays under the pool's 1% target; full speed again 20 s + 5 s after the last key."
}

# interference_demo: a small interference matrix on this machine (the demo's VMs keep the
# cores busy, so the numbers are only an illustration; `make bench` measures properly):
# a CPU-bound desktop next to a CPU-bound guest under the idle class, today's fixed cap
# and the adaptive controller, in paired frozen/running segments.
# ui_demo: the web UI answers with the example site, logged in as a pool admin (a
# session cookie from the login form, as a browser keeps it).
ui_demo() {
	echo "== web UI: alice (pool admin of lab-a) logs in and sees her pool"
	local jar="$D/ui.cookies" base="http://127.0.0.1:$HTTP_PORT"
	rm -f "$jar"
	if ! curl -fsS -c "$jar" -b "$jar" -H "Origin: $base" -o /dev/null \
		--data-urlencode uid=alice --data-urlencode password=alice-secret --data-urlencode next=/ui/ "$base/ui/login"; then
		echo "   FAILED: login to the web UI" >&2
		return 1
	fi
	local page
	page=$(curl -fsS -b "$jar" "$base/ui/") || { echo "   FAILED: overview" >&2; return 1; }
	local hosts
	hosts=$(grep -c 'href="/ui/hosts/' <<<"$page" || true)
	if ! grep -q '>lab-a<' <<<"$page" || grep -q '>lab-b<' <<<"$page"; then
		echo "   FAILED: alice's overview should list lab-a and not lab-b" >&2
		return 1
	fi
	echo "   overview at $base/ui/ lists lab-a with $hosts hosts for alice (lab-b is not hers)"
}

interference_demo() {
	echo
	echo "== interference: a CPU-bound desktop next to a CPU-bound guest (overtime-agent bench interference)"
	if ! "$AGENT" bench interference --desktop cpu --guest cpu --policy cgroup-idle,default,adaptive \
		--reps 2 --pairs 4 --adaptive-warmup 4s --no-probe-overhead --out "$D/interference" > "$D/interference.log" 2>&1; then
		tail -20 "$D/interference.log"; echo "demo: the interference matrix failed (log: $D/interference.log)"; return 1
	fi
	sed -n '/^| desktop/,/^$/p' "$D/interference/interference.md" | sed 's/^/   | /'
	echo "   (2 rounds on a machine busy with the demo's VMs: an illustration; docs/benchmarks/interference/ has the measurement)"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
