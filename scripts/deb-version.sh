#!/bin/sh
# The Debian version of a build: `scripts/deb-version.sh DESCRIBE COMMITDATE` prints the
# version of `git describe --tags --always --dirty` (DESCRIBE, what the binaries embed as
# main.version) made Debian-valid, so that one maps to the other (test/packaging_test.go):
#   v1.2.3                 -> 1.2.3
#   v1.2.3-4-gabc1234      -> 1.2.3+4.gabc1234
#   abc1234 (no tag yet)   -> 0.0~git20261124.abc1234   (COMMITDATE: the commit's YYYYMMDD)
#   ...-dirty              -> ...+dirty (or .dirty after a +)
set -eu
d=$1 date=${2:-00000000}
dirty=
case "$d" in *-dirty) dirty=1 d=${d%-dirty} ;; esac
case "$d" in
v[0-9]* | [0-9]*.*)
	v=$(printf '%s\n' "${d#v}" | sed 's/-\([0-9][0-9]*\)-g\([0-9a-f][0-9a-f]*\)$/+\1.g\2/; s/-/./g')
	;;
*) v="0.0~git${date}.${d}" ;;
esac
if [ -n "$dirty" ]; then
	case "$v" in *+*) v="$v.dirty" ;; *) v="$v+dirty" ;; esac
fi
printf '%s\n' "$v"
