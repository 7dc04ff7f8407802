#!/bin/sh
# check-hardening.sh ELF...: asserts, checksec-style, that each built object carries the
# hardening the Makefiles ask for, so that a lost flag fails `make check` instead of
# shipping quietly:
#   full RELRO   a GNU_RELRO segment and BIND_NOW (-Wl,-z,relro -Wl,-z,now)
#   NX stack     a GNU_STACK segment without E (-Wl,-z,noexecstack)
#   PIE          type DYN (executables; shared objects are DYN by nature)
#   canary       imports __stack_chk_fail (-fstack-protector-strong)
#   FORTIFY      imports at least one __*_chk function (-D_FORTIFY_SOURCE=2 with -O)
# The canary and FORTIFY checks assume the code has a buffer on the stack and a call
# FORTIFY can check (both plugin and daemon do); drop them for an object that has none.
READELF=${READELF:-readelf}
NM=${NM:-nm}
status=0
fail() {
	echo "$1: $2" >&2
	status=1
	bad=1
}
for f in "$@"; do
	bad=0
	dynamic=$($READELF -dW "$f") || { fail "$f" "not readable as ELF"; continue; }
	segments=$($READELF -lW "$f")
	imports=$($NM -D --undefined-only "$f" | awk '{sub(/@.*/, "", $NF); print $NF}')

	echo "$segments" | grep -q 'GNU_RELRO' || fail "$f" "no GNU_RELRO segment (-Wl,-z,relro)"
	echo "$dynamic" | grep -Eq '\(BIND_NOW\)|\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW' ||
		fail "$f" "no BIND_NOW (-Wl,-z,now): RELRO is only partial"
	stack=$(echo "$segments" | grep 'GNU_STACK')
	if [ -z "$stack" ]; then
		fail "$f" "no GNU_STACK segment: the stack defaults to executable (-Wl,-z,noexecstack)"
	elif echo "$stack" | awk '{print $(NF-1)}' | grep -q E; then
		fail "$f" "executable stack: $stack"
	fi
	$READELF -hW "$f" | grep -Eq 'Type:[[:space:]]+DYN' || fail "$f" "not PIE (type $($READELF -hW "$f" | awk '/Type:/{print $2}'))"
	echo "$imports" | grep -qx '__stack_chk_fail' || fail "$f" "no stack canary (-fstack-protector-strong)"
	echo "$imports" | grep -v '^__stack_chk_fail$' | grep -Eq '^__.*_chk$' ||
		fail "$f" "no FORTIFY calls (-D_FORTIFY_SOURCE=2 needs -O)"
	[ $bad -eq 0 ] && echo "$f: hardening ok (full RELRO, NX stack, PIE, canary, FORTIFY)"
done
exit $status
