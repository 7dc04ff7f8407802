#!/usr/bin/env bash
# `make deb`: the Debian packages overtime, overtime-agent, overtime-initramfs and overtime-slurm, built by
# dpkg-buildpackage (debhelper compat 13) into bin/deb/ (git-ignored).
#
# Layout: the packaging lives in packaging/debian/ (this project keeps no debian/ at the
# top level). dpkg-buildpackage needs debian/ at the root of the tree it builds, so this
# script assembles that tree in bin/deb/src/overtime/: the files git knows (tracked and
# untracked, not ignored, so a dirty tree builds what is checked out) plus
# packaging/debian as debian/, and a changelog whose version derives from `git describe`
# (scripts/deb-version.sh). Usage: scripts/deb.sh VERSION COMMIT (the Makefile's).
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:?version} commit=${2:-}
out=bin/deb
src=$out/src/overtime
debversion=$(scripts/deb-version.sh "$version" "$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || echo 00000000)")
date=$(git log -1 --format=%cD 2>/dev/null || date -R)

rm -rf "$out/src"
mkdir -p "$src"
git ls-files -coz --exclude-standard | while IFS= read -r -d '' f; do
	[ -e "$f" ] && printf '%s\0' "$f"
done | grep -zv '^packaging/' | tar --null -T - -cf - | tar -xf - -C "$src"
cp -a packaging/debian "$src/debian"
cat >"$src/debian/changelog" <<CHANGELOG
overtime ($debversion) unstable; urgency=medium

  * Built by make deb from $version,
    commit ${commit:-unknown}.

 -- Overtime developers <overtime@example.org>  $date
CHANGELOG

# debhelper sets HOME to a directory of its own: hand Go the caches by name so that the
# package build reuses (and, with GOPROXY=off in debian/rules, only uses) the host's.
export GOCACHE GOMODCACHE
GOCACHE=$(go env GOCACHE)
GOMODCACHE=$(go env GOMODCACHE)
export OVERTIME_VERSION=$version OVERTIME_COMMIT=$commit
(cd "$src" && dpkg-buildpackage -us -uc -b)

rm -f "$out"/*.deb "$out"/*.buildinfo "$out"/*.changes
mv "$out"/src/*.deb "$out"/src/*.buildinfo "$out"/src/*.changes "$out"/
# The build tree is a copy of the sources (a Go module of its own): not left lying around.
rm -rf "$out/src"
echo "deb: $(cd "$out" && ls ./*.deb | tr '\n' ' ')in $out (version $debversion)"
