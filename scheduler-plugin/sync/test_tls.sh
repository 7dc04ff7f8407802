#!/bin/sh
# make check: the daemon's HTTP client really trusts --ca-file (CURLOPT_CAINFO)
# and checks the server's name. A throwaway CA (and a second, unrelated one)
# made with openssl; two `openssl s_server -WWW` on 127.0.0.1 (ephemeral ports,
# no network namespace): one with a certificate for IP 127.0.0.1, one with a
# certificate of the same CA for another name. test_tls.c does the requests.
# Usage: test_tls.sh ./test_tls
set -eu

bin=$1
if ! command -v openssl >/dev/null 2>&1; then
	echo "test_tls: SKIPPED: no openssl command (scripts/deps.sh installs it)"
	exit 0
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/overtime-sync-tls.XXXXXX")
pids=
cleanup() {
	for p in $pids; do
		kill "$p" 2>/dev/null || :
	done
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

cat > "$dir/openssl.cnf" <<'CNF'
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[good]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = IP:127.0.0.1
[wrong]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:sm.example.org
CNF

key() {
	openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
		-out "$dir/$1.key" 2>/dev/null
}
ca() {
	key "$1"
	openssl req -x509 -config "$dir/openssl.cnf" -extensions ca \
		-key "$dir/$1.key" -out "$dir/$1.pem" -days 1 -subj "/CN=$1"
}
leaf() {
	key "$1"
	openssl req -new -config "$dir/openssl.cnf" -key "$dir/$1.key" \
		-out "$dir/$1.csr" -subj "/CN=$1"
	openssl x509 -req -in "$dir/$1.csr" -CA "$dir/site-ca.pem" \
		-CAkey "$dir/site-ca.key" -set_serial "$2" -days 1 \
		-extfile "$dir/openssl.cnf" -extensions "$1" \
		-out "$dir/$1.pem" 2>/dev/null
}
ca site-ca
ca other-ca
leaf good 2
leaf wrong 3

# -WWW serves files under its working directory by request path, query
# included.
mkdir -p "$dir/www/api/v1/slurm"
printf '%s\n' '{"now":"2026-11-22T09:00:00Z","horizonSeconds":3600,"windows":[{"node":"pc1","start":"2026-11-22T10:00:00Z","end":"2026-11-22T12:00:00Z","mode":"desktop"}]}' \
	> "$dir/www/api/v1/slurm/reservations?horizon=3600"

# Starts a server for cert $1 and prints its port.
serve() {
	(cd "$dir/www" && exec openssl s_server -accept 127.0.0.1:0 \
		-cert "$dir/$1.pem" -key "$dir/$1.key" -WWW \
		</dev/null >"$dir/$1.out" 2>&1) &
	pids="$pids $!"
}
port() {
	i=0
	while [ $i -lt 100 ]; do
		p=$(sed -n 's/^ACCEPT .*:\([0-9][0-9]*\)$/\1/p' "$dir/$1.out")
		if [ -n "$p" ]; then
			echo "$p"
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	echo "test_tls: openssl s_server ($1) printed no port:" >&2
	cat "$dir/$1.out" >&2
	return 1
}
serve good
serve wrong
good=$(port good)
wrong=$(port wrong)

"$bin" "https://127.0.0.1:$good" "https://127.0.0.1:$wrong" \
	"$dir/site-ca.pem" "$dir/other-ca.pem"
