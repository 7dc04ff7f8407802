#!/usr/bin/env bash
# make demo / make demo-stop. Starts a throwaway slapd with the Overtime schema, bootstraps
# it, starts `overtime serve`, applies docs/examples/site.yaml, creates one user per role
# and prints what to try. Everything lives in $OVERTIME_DEMO_DIR and is removed on stop.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
D=${OVERTIME_DEMO_DIR:-/tmp/overtime-demo}
HTTP_PORT=${OVERTIME_DEMO_PORT:-8080}
LDAP_PORT=${OVERTIME_DEMO_LDAP_PORT:-3890}
BIN=$ROOT/bin/overtime

stop() {
	[ -d "$D" ] || { echo "demo: not running"; return 0; }
	for f in "$D/serve.pid" "$D/slapd/slapd.pid"; do
		[ -s "$f" ] || continue
		pid=$(cat "$f")
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null || true
	done
	rm -rf "$D"
	echo "demo: stopped and removed $D"
}

wait_http() { # poll with a deadline instead of sleeping a guessed time
	local url=$1 deadline=$((SECONDS + 20))
	until curl -fsS -o /dev/null "$url" 2>/dev/null; do
		[ $SECONDS -lt $deadline ] || { echo "demo: $url did not come up; log:"; tail -20 "$D/serve.log"; return 1; }
		sleep 0.1
	done
}

start() {
	if [ -e "$D/serve.pid" ]; then
		echo "demo: already running in $D (make demo-stop first)"; exit 1
	fi
	mkdir -p "$D"
	trap 'echo; stop; exit 130' INT TERM
	trap 'rc=$?; [ $rc -eq 0 ] || { echo "demo: failed, cleaning up"; stop; }' EXIT

	ROOTPW=demo-root-secret
	"$BIN" dev slapd --dir "$D/slapd" --port "$LDAP_PORT" --root-password "$ROOTPW" > "$D/ldap.env"
	set -a; . "$D/ldap.env"; set +a
	export OVERTIME_LDAP_PASSWORD=$ROOTPW
	export OVERTIME_ADMIN_PASSWORD=admin-secret

	"$BIN" ldap init --site example --timezone Europe/Berlin --admin admin
	"$BIN" serve --listen "127.0.0.1:$HTTP_PORT" --reload 10s > "$D/serve.log" 2>&1 &
	echo $! > "$D/serve.pid"
	wait_http "http://127.0.0.1:$HTTP_PORT/healthz"

	export OVERTIME_SERVER=http://127.0.0.1:$HTTP_PORT OVERTIME_USER=admin OVERTIME_PASSWORD=admin-secret
	echo "== overtime site apply -f docs/examples/site.yaml"
	"$BIN" site apply -f docs/examples/site.yaml
	for u in alice bob carol dave; do
		OVERTIME_NEW_PASSWORD="$u-secret" "$BIN" user add "$u" >/dev/null
	done

	echo
	echo "== overtime mode-at pc-a01 '2026-12-02 10:30'   (Wednesday lecture slot)"
	"$BIN" mode-at pc-a01 '2026-12-02 10:30'
	echo
	echo "== overtime mode-at pc-a01 '2026-12-09 10:30'   (exam exception wins)"
	"$BIN" mode-at pc-a01 '2026-12-09 10:30'
	echo
	echo "== curl http://127.0.0.1:$HTTP_PORT/boot/ipxe/52:54:00:0a:00:01   (iPXE script, rendered per request)"
	curl -fsS "http://127.0.0.1:$HTTP_PORT/boot/ipxe/52:54:00:0a:00:01" | head -25
	echo "..."
	cat <<EOT

Overtime demo is running (state in $D).

  API and boot scripts   http://127.0.0.1:$HTTP_PORT   (OpenAPI: docs/api/openapi.yaml)
  LDAP                   $OVERTIME_LDAP_URL  base $OVERTIME_LDAP_BASE
  Users (password = <uid>-secret, admin: admin-secret)
      admin  site admin          alice  pool admin lab-a     bob   pool admin lab-b
      carol  lecturer lab-a      dave   viewer

Try (in another shell):
  export OVERTIME_SERVER=http://127.0.0.1:$HTTP_PORT OVERTIME_USER=admin OVERTIME_PASSWORD=admin-secret
  bin/overtime host list
  bin/overtime mode-at pc-a05 '2026-12-05 23:00'
  bin/overtime schedule list --pool lab-a
  bin/overtime render dnsmasq            # also: dnsmasq-hosts slurm ganesha exports
  bin/overtime site export
  curl http://127.0.0.1:$HTTP_PORT/pxelinux.cfg/01-52-54-00-0b-00-01
  OVERTIME_USER=bob OVERTIME_PASSWORD=bob-secret bin/overtime host delete pc-a01   # refused: lab-a is not bob's
  curl -u alice:alice-secret http://127.0.0.1:$HTTP_PORT/api/v1/hosts?pool=lab-a

Stop with: make demo-stop$( [ -t 0 ] && echo " (or Ctrl-C here)")
EOT
	trap - EXIT
	if [ -t 0 ] && [ -z "${OVERTIME_DEMO_DETACH:-}" ]; then
		# Stay in the foreground so that Ctrl-C tears everything down.
		tail -n 0 -f "$D/serve.log" &
		wait $(cat "$D/serve.pid") || true
		stop
	fi
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
*) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
