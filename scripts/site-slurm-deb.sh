#!/usr/bin/env bash
# overtime-slurm for the site's Slurm (docs/slurm.md, "The guest's Slurm"):
#
#   scripts/site-slurm-deb.sh SLURM_DEBS_DIR OVERTIME_SLURM_DEB OUTDIR
#
# SLURM_DEBS_DIR holds the site's Slurm as .debs for Debian 12 (what images/build.sh takes
# as SLURM_DEBS), its -dev package among them: SchedMD's packaging (slurm-smd,
# slurm-smd-slurmd, slurm-smd-dev, ...) or Debian-style packages (slurmd,
# slurm-wlm-basic-plugins, libslurmNN, libslurm-dev, ...). OVERTIME_SLURM_DEB is
# overtime-slurm as `make deb` built it (for Debian's Slurm 22.05). The script
#
#   1. reads the Slurm version from the packages (one version, all of them) and checks the
#      -dev package's slurm/slurm_version.h says the same release;
#   2. rebuilds spank_overtime.so from this checkout's scheduler-plugin/spank against the
#      -dev package's headers (unpacked with dpkg-deb -x, nothing installed), in a
#      directory of its own, and checks its exports and hardening (make check-exports
#      check-hardening): a Slurm plugin carries the release it was built for
#      (plugin_version) and Slurm loads plugins of its own release only;
#   3. writes OUTDIR/overtime-slurm_VERSION+slurmX.Y_amd64.deb: the input package with
#      that plugin in the packaging's PluginDir (SchedMD's: /usr/lib/x86_64-linux-gnu/slurm;
#      Debian-style: /usr/lib/x86_64-linux-gnu/slurm-wlm), Depends on the site's base
#      package of that release (slurm-smd or slurm-wlm-basic-plugins, >= X.Y and
#      << X.Y+1) instead of Debian's libslurm, and without overtime-slurm-sync: the sync
#      daemon is built against Debian's libslurm only, its code does not compile against
#      Slurm 23.11 and newer (hostlist_t, slurm_get_errno), so it is left out, said so on
#      stderr and in the package's description.
#
# It prints the new .deb's path on stdout. The package is reproducible: its file times are
# SOURCE_DATE_EPOCH (default: the input package's newest file), the plugin is built
# without debug information and stripped, so the same inputs give the same bytes (an input
# of images/build.sh's cache key). Refuses, before building anything: no -dev package, no
# slurm/spank.h in it, a version it cannot read, two Slurm versions, SchedMD's and
# Debian-style packages mixed, no base package, a base package without plugins in the
# PluginDir, headers of another release.
set -euo pipefail
umask 022

prog=site-slurm-deb
die() {
	echo "${prog}: $*" >&2
	exit 1
}
[ $# -eq 3 ] || die "usage: $0 SLURM_DEBS_DIR OVERTIME_SLURM_DEB OUTDIR"
dir=$1 ours=$2 outdir=$3
repo=$(cd "$(dirname "$0")/.." && pwd)
src=${repo}/scheduler-plugin/spank
multiarch=x86_64-linux-gnu

for tool in dpkg-deb make cc strip; do
	command -v "${tool}" >/dev/null || die "${tool} not found (Debian packages: dpkg, make, gcc, binutils)"
done
[ -d "${dir}" ] || die "SLURM_DEBS_DIR ${dir}: no such directory"
[ -f "${ours}" ] || die "${ours}: no such file (make deb builds overtime-slurm into bin/deb)"
p=$(dpkg-deb -f "${ours}" Package 2>/dev/null) || die "${ours} is not a .deb"
[ "${p}" = overtime-slurm ] || die "${ours} is ${p}, not overtime-slurm"
ourver=$(dpkg-deb -f "${ours}" Version)
case "${ourver}" in
*+slurm[0-9]*) die "${ours} is already built for a site's Slurm (version ${ourver}): give the one make deb built" ;;
esac

# The site's packages. Slurm's are those named slurm* or libslurm* (a directory may hold
# other .debs the site installs with them, e.g. PMIx): they give the version and style.
shopt -s nullglob
files=("${dir}"/*.deb)
[ ${#files[@]} -gt 0 ] || die "${dir}: no .deb files"
smd='' debstyle='' version='' version_from='' devs=() names=' '
for f in "${files[@]}"; do
	b=$(basename "${f}")
	name=$(dpkg-deb -f "${f}" Package 2>/dev/null) || die "${dir}: ${b} is not a .deb"
	case "${name}" in
	slurm-smd*) smd=${smd:-${b}} ;;
	slurm* | libslurm* | libpam-slurm*) debstyle=${debstyle:-${b}} ;;
	*) continue ;;
	esac
	names="${names}${name} "
	v=$(dpkg-deb -f "${f}" Version 2>/dev/null || true)
	upstream=${v#*:}
	upstream=${upstream%-*}
	[[ ${upstream} =~ ^[0-9]+\.[0-9]+(\.[0-9]+)?([~+.].*)?$ ]] ||
		die "${dir}: cannot read a Slurm version from ${b} (Version: '${v}')"
	if [ -z "${version}" ]; then
		version=${v} version_from=${b}
	elif [ "${v}" != "${version}" ]; then
		die "${dir}: two Slurm versions: ${version_from} is ${version}, ${b} is ${v} (one build's packages only)"
	fi
	case "${name}" in *-dev) devs+=("${f}") ;; esac
done
[ -n "${version}" ] || die "${dir}: no Slurm packages (slurm*, libslurm*)"
[ -z "${smd}" ] || [ -z "${debstyle}" ] ||
	die "${dir}: SchedMD's packages (${smd}) and Debian-style ones (${debstyle}) mixed: one packaging only"
[ ${#devs[@]} -gt 0 ] ||
	die "${dir}: no Slurm -dev package (slurm-smd-dev or libslurm-dev): spank_overtime.so is built against the site's slurm/spank.h"

upstream=${version#*:}
upstream=${upstream%-*}
epoch=
case "${version}" in *:*) epoch=${version%%:*}: ;; esac
major=${upstream%%.*}
rest=${upstream#*.}
minor=${rest%%[!0-9]*}
release=${major}.${minor}
next=${major}.$(printf '%02d' $((10#${minor} + 1)))

# The packaging decides where slurmd looks for plugins, and what the plugin depends on.
if [ -n "${smd}" ]; then
	base=slurm-smd plugindir=/usr/lib/${multiarch}/slurm style="SchedMD's packages"
else
	base=slurm-wlm-basic-plugins plugindir=/usr/lib/${multiarch}/slurm-wlm style="Debian-style packages"
fi
case "${names}" in
*" ${base} "*) ;;
*) die "${dir}: no ${base}_*.deb (${style}): the plugin depends on it" ;;
esac
basedeb=
for f in "${files[@]}"; do
	if [ "$(dpkg-deb -f "${f}" Package)" = "${base}" ]; then basedeb=${f}; fi
done
dpkg-deb -c "${basedeb}" | grep -q " \.${plugindir}/[^/]*\.so\$" ||
	die "$(basename "${basedeb}") has no plugins in ${plugindir}: not the PluginDir this script knows for ${style}"

tmp=$(mktemp -d)
trap 'rm -rf "${tmp}"' EXIT

# The headers: every Slurm -dev package unpacked into one tree.
mkdir -p "${tmp}/dev"
devnames=
for f in "${devs[@]}"; do
	dpkg-deb -x "${f}" "${tmp}/dev"
	devnames="${devnames:+${devnames}, }$(basename "${f}")"
done
inc=${tmp}/dev/usr/include
[ -f "${inc}/slurm/spank.h" ] || die "${dir}: no usr/include/slurm/spank.h in ${devnames}"
[ -f "${inc}/slurm/slurm_version.h" ] || die "${dir}: no usr/include/slurm/slurm_version.h in ${devnames}"
hv=$(sed -n 's/^#[[:space:]]*define[[:space:]][[:space:]]*SLURM_VERSION_NUMBER[[:space:]][[:space:]]*\(0x[0-9a-fA-F]*\).*/\1/p' "${inc}/slurm/slurm_version.h" | head -n 1)
[ -n "${hv}" ] || die "${devnames}: slurm/slurm_version.h has no SLURM_VERSION_NUMBER"
hrelease=$(((hv >> 16) & 0xff)).$(printf '%02d' $(((hv >> 8) & 0xff)))
[ "${hrelease}" = "${release}" ] ||
	die "${devnames}: its headers are Slurm ${hrelease}'s (slurm_version.h), the packages are ${version}"

# The plugin, out of the source tree (the Makefile's SRCDIR, as its sanitizer lane), with
# no debug information and no build paths: the same inputs make the same bytes.
mkdir -p "${tmp}/build"
echo "${prog}: building spank_overtime.so against Slurm ${version}'s headers (${devnames})" >&2
if ! make --no-print-directory -s -C "${tmp}/build" -f "${src}/Makefile" SRCDIR="${src}" \
	SLURM_INCLUDE="${inc}" CFLAGS="-O2 -ffile-prefix-map=${tmp}=. -ffile-prefix-map=${src}=scheduler-plugin/spank" \
	spank_overtime.so check-exports check-hardening >&2; then
	die "spank_overtime.so does not build against Slurm ${version}'s headers (${devnames}): the errors are above (it also needs libcurl4-openssl-dev and libjson-c-dev)"
fi
strip --remove-section=.comment --remove-section=.note --strip-unneeded "${tmp}/build/spank_overtime.so"

# The package: the input's tree and control files, the plugin replaced.
pkg=${tmp}/pkg
dpkg-deb -R "${ours}" "${pkg}"
chmod 0755 "${pkg}"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(find "${pkg}" -type f -printf '%T@\n' | sort -n | tail -n 1 | cut -d. -f1)
fi
export SOURCE_DATE_EPOCH
install -d "${pkg}${plugindir}"
install -m 0644 "${tmp}/build/spank_overtime.so" "${pkg}${plugindir}/spank_overtime.so"
find "${pkg}" -path "${pkg}/DEBIAN" -prune -o -name spank_overtime.so -type f -print | while read -r f; do
	[ "${f}" = "${pkg}${plugindir}/spank_overtime.so" ] && continue
	rm -f "${f}"
	rmdir -p --ignore-fail-on-non-empty "$(dirname "${f}")"
done

# overtime-slurm-sync: left out, with what debhelper added for its unit.
sync=$(cd "${pkg}" && find . -path ./DEBIAN -prune -o -name 'overtime-slurm-sync*' -print | sed 's|^\./||' | LC_ALL=C sort | tr '\n' ' ')
if [ -n "${sync}" ]; then
	# shellcheck disable=SC2086 # paths from the package, no spaces
	(cd "${pkg}" && rm -f ${sync} && for f in ${sync}; do rmdir -p --ignore-fail-on-non-empty "$(dirname "${f}")"; done)
	echo "${prog}: leaving out overtime-slurm-sync (${sync% }): it builds against Debian's libslurm (22.05) only, its code does not compile against Slurm 23.11 and newer (docs/slurm.md, Known gaps)" >&2
fi
for s in preinst postinst prerm postrm; do
	f=${pkg}/DEBIAN/${s}
	[ -f "${f}" ] || continue
	awk '
		/^# Automatically added by / { inblk = 1; blk = $0 "\n"; next }
		inblk {
			blk = blk $0 "\n"
			if (/^# End automatically added section/) {
				inblk = 0
				if (blk !~ /overtime-slurm-sync/) printf "%s", blk
				blk = ""
			}
			next
		}
		{ print }
		END { if (inblk) printf "%s", blk }
	' "${f}" >"${f}.new"
	if grep -q overtime-slurm-sync "${f}.new"; then
		die "DEBIAN/${s} of ${ours} names overtime-slurm-sync outside debhelper's sections: teach ${prog} to leave that out"
	fi
	if grep -qv -e '^#!' -e '^set -e$' -e '^[[:space:]]*$' "${f}.new"; then
		chmod 0755 "${f}.new"
		mv "${f}.new" "${f}"
	else
		rm -f "${f}" "${f}.new"
	fi
done
if [ -f "${pkg}/DEBIAN/conffiles" ]; then
	grep -v overtime-slurm-sync "${pkg}/DEBIAN/conffiles" >"${pkg}/DEBIAN/conffiles.new" || true
	mv "${pkg}/DEBIAN/conffiles.new" "${pkg}/DEBIAN/conffiles"
	[ -s "${pkg}/DEBIAN/conffiles" ] || rm -f "${pkg}/DEBIAN/conffiles"
fi
for f in "${pkg}"/DEBIAN/*; do
	case "$(basename "${f}")" in control | md5sums) continue ;; esac
	! grep -q overtime-slurm-sync "${f}" || die "DEBIAN/$(basename "${f}") of ${ours} names overtime-slurm-sync: teach ${prog} to leave that out"
done

# Depends and Recommends without Debian's Slurm (libslurmNN came with the sync daemon, the
# plugin links no libslurm: check-exports), the site's base package of this release added.
without_debian_slurm() {
	tr ',' '\n' | sed 's/^ *//; s/ *$//' | grep -v -E '^(libslurm[0-9a-z-]*|slurm-wlm[a-z-]*|slurmd)([ :(]|$)' | grep -v '^$' | paste -sd, - | sed 's/,/, /g' || true
}
depends=$(dpkg-deb -f "${ours}" Depends | without_debian_slurm)
depends="${depends:+${depends}, }${base} (>= ${epoch}${release}), ${base} (<< ${epoch}${next}~)"
recommends=$(dpkg-deb -f "${ours}" Recommends | without_debian_slurm)
newver=${ourver}+slurm${release}
size=$(du -k -s --apparent-size --exclude=DEBIAN "${pkg}" | cut -f1)
awk -v ver="${newver}" -v dep="${depends}" -v rec="${recommends}" -v size="${size}" \
	-v l1=" This build (scripts/site-slurm-deb.sh) is for the site's Slurm ${release}" \
	-v l2=" (${base}, plugins in ${plugindir})." -v l3=" It leaves out overtime-slurm-sync." '
	function note() { if (indesc) { print " ."; print l1; print l2; print l3; indesc = 0 } }
	/^[^ \t]/ {
		note()
		field = $0
		sub(/:.*/, "", field)
		skip = 0
		if (field == "Version") { print "Version: " ver; skip = 1; next }
		if (field == "Depends") { print "Depends: " dep; skip = 1; next }
		if (field == "Recommends") { if (rec != "") print "Recommends: " rec; skip = 1; next }
		if (field == "Installed-Size") { print "Installed-Size: " size; skip = 1; next }
		if (field == "Description") indesc = 1
		print
		next
	}
	skip { next }
	{ print }
	END { note() }
' "${pkg}/DEBIAN/control" >"${tmp}/control"
grep -q '^Depends:' "${tmp}/control" || echo "Depends: ${depends}" >>"${tmp}/control"
mv "${tmp}/control" "${pkg}/DEBIAN/control"
chmod 0644 "${pkg}/DEBIAN/control"
(cd "${pkg}" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 -r md5sum) >"${pkg}/DEBIAN/md5sums"
chmod 0644 "${pkg}/DEBIAN/md5sums"
[ -s "${pkg}/DEBIAN/md5sums" ] || rm -f "${pkg}/DEBIAN/md5sums"
find "${pkg}" -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +

mkdir -p "${outdir}"
out=${outdir}/overtime-slurm_${newver#*:}_amd64.deb
dpkg-deb --root-owner-group -Zxz --build "${pkg}" "${tmp}/out.deb" >/dev/null
mv "${tmp}/out.deb" "${out}"
echo "${prog}: ${out}: spank_overtime.so for Slurm ${version} in ${plugindir}; Depends: ${depends}" >&2
echo "${out}"
