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
#   3. rebuilds overtime-slurm-sync (when the input carries it, as make deb's does) from
#      scheduler-plugin/sync against the same headers and linked against the site's
#      libslurm: the one Slurm package that ships libslurm.so.N (SchedMD's: slurm-smd;
#      Debian-style: libslurmNN), unpacked next to the headers. It is linked through a
#      libslurm.so of our own pointing at that file, with -rpath-link only: no RPATH or
#      RUNPATH, so at run time it loads libslurm.so.N from the system's library path where
#      the site's package installs it (that package must install it there). The result is
#      checked (make check-hardening; readelf -d: NEEDED is the site's SONAME, no other
#      libslurm, no RPATH/RUNPATH) or the script fails;
#   4. writes OUTDIR/overtime-slurm_VERSION+slurmX.Y_amd64.deb: the input package with
#      that plugin in the packaging's PluginDir (SchedMD's: /usr/lib/x86_64-linux-gnu/slurm;
#      Debian-style: /usr/lib/x86_64-linux-gnu/slurm-wlm), the rebuilt sync daemon in
#      /usr/sbin with its man page, unit and maintainer scripts as they were, Depends on
#      the site's base package of that release (slurm-smd or slurm-wlm-basic-plugins,
#      >= X.Y and << X.Y+1) and on the package of its libslurm.so.N (when that is another:
#      libslurmNN >= X.Y) instead of Debian's libslurm, said in the package's description.
#
# It prints the new .deb's path on stdout. The package is reproducible: its file times are
# SOURCE_DATE_EPOCH (default: the input package's newest file), the plugin is built
# without debug information and stripped, so the same inputs give the same bytes (an input
# of images/build.sh's cache key). Refuses, before building anything: no -dev package, no
# slurm/spank.h in it, a version it cannot read, two Slurm versions, SchedMD's and
# Debian-style packages mixed, no base package, a base package without plugins in the
# PluginDir, headers of another release; and, with the sync daemon: no package shipping
# libslurm.so.N, two of them, libslurm outside the system's library directories, a
# libslurm whose SONAME is not its file's name. Fails, after building, on code that does
# not compile or link against them and on a daemon that would not load the site's
# libslurm.so.N.
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
syncsrc=${repo}/scheduler-plugin/sync
sync_bin=usr/sbin/overtime-slurm-sync
multiarch=x86_64-linux-gnu

for tool in dpkg-deb make cc strip readelf; do
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
smd='' debstyle='' version='' version_from='' devs=() names=' ' slurmdebs=()
for f in "${files[@]}"; do
	b=$(basename "${f}")
	name=$(dpkg-deb -f "${f}" Package 2>/dev/null) || die "${dir}: ${b} is not a .deb"
	case "${name}" in
	slurm-smd*) smd=${smd:-${b}} ;;
	slurm* | libslurm* | libpam-slurm*) debstyle=${debstyle:-${b}} ;;
	*) continue ;;
	esac
	names="${names}${name} "
	slurmdebs+=("${f}")
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
# grep -c reads to the end: grep -q would close the pipe early, and pipefail would count
# dpkg-deb's SIGPIPE as a failure (seen in CI, whenever the match came early).
[ "$(dpkg-deb -c "${basedeb}" | grep -c " \.${plugindir}/[^/]*\.so\$" || true)" -gt 0 ] ||
	die "$(basename "${basedeb}") has no plugins in ${plugindir}: not the PluginDir this script knows for ${style}"

# overtime-slurm-sync, when the input carries it, links against the site's libslurm: the
# one Slurm package that ships libslurm.so.N (a file or the SONAME's link), in a directory
# of the system's library path (the daemon has no rpath).
withsync=
if [ "$(dpkg-deb -c "${ours}" | awk '{ print $6 }' | grep -cx "\./${sync_bin}" || true)" -gt 0 ]; then withsync=1; fi
libdeb='' libdir='' libpkg=''
if [ -n "${withsync}" ]; then
	for f in "${slurmdebs[@]}"; do
		l=$(dpkg-deb -c "${f}" | awk '{ sub(/^\.\//, "", $6); print $6 }' | grep -E '(^|/)libslurm\.so\.[0-9]+(\.[0-9]+)*$' || true)
		[ -n "${l}" ] || continue
		[ -z "${libdeb}" ] ||
			die "${dir}: $(basename "${libdeb}") and $(basename "${f}") both ship libslurm.so.N: overtime-slurm-sync links against one libslurm"
		libdeb=${f}
		libdir=$(printf '%s\n' "${l}" | xargs -n 1 dirname | LC_ALL=C sort -u | paste -sd' ' -)
	done
	[ -n "${libdeb}" ] ||
		die "${dir}: no libslurm.so.N in the Slurm packages (SchedMD's slurm-smd or Debian-style libslurmNN ship it): overtime-slurm-sync links against the site's libslurm"
	case "${libdir}" in
	"usr/lib/${multiarch}" | "lib/${multiarch}" | usr/lib | lib) ;;
	*) die "$(basename "${libdeb}") ships libslurm.so.N in ${libdir}: not a directory of the system's library path, where overtime-slurm-sync (which has no rpath) would look for it" ;;
	esac
	libpkg=$(dpkg-deb -f "${libdeb}" Package)
fi

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

# The site's libslurm, unpacked into the same tree: its one library file, whose SONAME is
# what the daemon will NEED, and a libslurm.so of our own pointing at it (the site's -dev
# link may be absolute, or be in the base package).
soname=
if [ -n "${withsync}" ]; then
	libname=$(basename "${libdeb}")
	dpkg-deb -x "${libdeb}" "${tmp}/dev"
	real=
	for f in "${tmp}/dev/${libdir}"/libslurm.so.*; do
		if [ ! -f "${f}" ] || [ -L "${f}" ]; then continue; fi
		[ -z "${real}" ] || die "${libname}: two libslurm files in /${libdir}, $(basename "${real}") and $(basename "${f}"): which one the daemon would load is not clear"
		real=${f}
	done
	[ -n "${real}" ] || die "${libname}: no libslurm.so.N file in /${libdir}, only links"
	soname=$(readelf -dW "${real}" 2>/dev/null | sed -n 's/^.*(SONAME).*\[\(.*\)\]$/\1/p')
	case "$(basename "${real}")" in
	"${soname}" | "${soname}".*) [[ ${soname} =~ ^libslurm\.so\.[0-9]+$ ]] || bad=1 ;;
	*) bad=1 ;;
	esac
	[ -z "${bad:-}" ] ||
		die "${libname}: /${libdir}/$(basename "${real}") has the SONAME '${soname}', not the libslurm.so.N its name says"
	mkdir -p "${tmp}/link"
	ln -s "${real}" "${tmp}/link/libslurm.so"
fi

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

# The sync daemon, the same way, linked against the site's libslurm.so.N (-L our link,
# -rpath-link for what that library needs from its own packages; nothing of the temporary
# tree is recorded in the binary).
if [ -n "${withsync}" ]; then
	mkdir -p "${tmp}/sync"
	echo "${prog}: building overtime-slurm-sync against Slurm ${version}'s headers and ${soname} (${libname})" >&2
	if ! make --no-print-directory -s -C "${tmp}/sync" -f "${syncsrc}/Makefile" SRCDIR="${syncsrc}" \
		CPPFLAGS="-I${inc}" CFLAGS="-O2 -ffile-prefix-map=${tmp}=. -ffile-prefix-map=${syncsrc}=scheduler-plugin/sync" \
		LDFLAGS="-L${tmp}/link -Wl,-rpath-link,${tmp}/dev/${libdir}" overtime-slurm-sync check-hardening >&2; then
		die "overtime-slurm-sync does not build against Slurm ${version}'s headers (${devnames}) and ${soname} (${libname}): the errors are above (it also needs libcurl4-openssl-dev and libjson-c-dev)"
	fi
	strip --remove-section=.comment --remove-section=.note "${tmp}/sync/overtime-slurm-sync"
	dyn=$(readelf -dW "${tmp}/sync/overtime-slurm-sync")
	needed=$(printf '%s\n' "${dyn}" | sed -n 's/^.*(NEEDED).*\[\(libslurm[^]]*\)\]$/\1/p' | paste -sd' ' -)
	[ "${needed}" = "${soname}" ] ||
		die "the rebuilt overtime-slurm-sync NEEDs '${needed}', not the site's ${soname} (${libname}) alone: it would not load the site's libslurm"
	if printf '%s\n' "${dyn}" | grep -E '\((RPATH|RUNPATH)\)' >&2; then
		die "the rebuilt overtime-slurm-sync has an RPATH or RUNPATH (above): it must load ${soname} from the system's library path"
	fi
fi

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

if [ -n "${withsync}" ]; then
	install -m 0755 "${tmp}/sync/overtime-slurm-sync" "${pkg}/${sync_bin}"
fi

# Depends and Recommends without Debian's Slurm (libslurmNN came with the sync daemon, the
# plugin links no libslurm: check-exports), the site's base package of this release added,
# and the package of the site's libslurm.so.N when the daemon is there and that is another
# (Debian-style: libslurmNN; SchedMD's slurm-smd is the base package).
without_debian_slurm() {
	tr ',' '\n' | sed 's/^ *//; s/ *$//' | grep -v -E '^(libslurm[0-9a-z-]*|slurm-wlm[a-z-]*|slurmd)([ :(]|$)' | grep -v '^$' | paste -sd, - | sed 's/,/, /g' || true
}
depends=$(dpkg-deb -f "${ours}" Depends | without_debian_slurm)
depends="${depends:+${depends}, }${base} (>= ${epoch}${release}), ${base} (<< ${epoch}${next}~)"
if [ -n "${withsync}" ] && [ "${libpkg}" != "${base}" ]; then
	depends="${depends}, ${libpkg} (>= ${epoch}${release})"
fi
synced=
[ -z "${withsync}" ] || synced=" overtime-slurm-sync is linked against its ${soname} (${libpkg})."
recommends=$(dpkg-deb -f "${ours}" Recommends | without_debian_slurm)
newver=${ourver}+slurm${release}
size=$(du -k -s --apparent-size --exclude=DEBIAN "${pkg}" | cut -f1)
awk -v ver="${newver}" -v dep="${depends}" -v rec="${recommends}" -v size="${size}" \
	-v l1=" This build (scripts/site-slurm-deb.sh) is for the site's Slurm ${release}" \
	-v l2=" (${base}, plugins in ${plugindir})." -v l3="${synced}" '
	function note() { if (indesc) { print " ."; print l1; print l2; if (l3 != "") print l3; indesc = 0 } }
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
echo "${prog}: ${out}: spank_overtime.so for Slurm ${version} in ${plugindir}${withsync:+, overtime-slurm-sync linked against ${soname}}; Depends: ${depends}" >&2
echo "${out}"
