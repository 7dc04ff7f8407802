#!/usr/bin/env bash
# Build an Overtime image from a recipe in images/recipes/ (docs/images.md):
#
#   images/build.sh [--debs DIR] RECIPE OUTDIR   build into OUTDIR (a no-op when OUTDIR is up to date)
#   images/build.sh [--debs DIR] --key RECIPE    print the cache key of the current inputs
#   images/build.sh [--debs DIR] --list RECIPE   print what the image gets: "debian PKG" for each
#                                                package of the base, "deb FILE" for each .deb
#                                                installed over it (no root; nothing built but
#                                                OVERTIME_SLURM_FOR's overtime-slurm, below)
#
# OUTDIR receives vmlinuz, initrd.img, root.squashfs, manifest.json and SHA256SUMS (the
# format of a published version directory: images/artefact). Two stages, each cached by a
# hash of its inputs under ${OVERTIME_CACHE:-/var/cache/overtime}/images, so CI's fresh
# checkouts reuse them:
#
#   1. base: mmdebstrap of the recipe's Debian packages (and its parent's), as a tarball.
#      Key: the recipe files, the suite, the mmdebstrap version and this script's stage-1
#      code. Takes a minute or two; rebuilt only when the package lists change (delete
#      the cache to pick up newer Debian packages).
#   2. image: the base unpacked, Overtime's own .debs (from make deb, in --debs DIR,
#      default bin/deb) and the site's (the recipe's SITE_DEBS directories, e.g. the
#      compute guest's Slurm: SLURM_DEBS) installed with dpkg, the recipe's customize
#      scripts run, the initrd made with boot=overtime's configuration, the tree
#      squashed. Key: the stage-1 key, the .debs' sha256, the customize scripts,
#      SOURCE_DATE_EPOCH.
#
# A recipe's OVERTIME_SLURM_FOR=DIR (the compute guest's, with SLURM_DEBS) replaces
# overtime-slurm from --debs with one built for the Slurm .debs in DIR by
# scripts/site-slurm-deb.sh (its plugin compiled against their headers, in their
# PluginDir), in a temporary directory at every run, --key and --list too: that package
# is reproducible, so it enters the key by its sha256 like the others.
#
# Recipes are looked up in ${OVERTIME_RECIPES:-images/recipes}.
#
# Reproducible: SOURCE_DATE_EPOCH (default: the time of the last commit that touched the
# recipe) fixes every time stamp in the squashfs and the manifest; the package list is
# what the mirror served when the base was built. A failed build leaves OUTDIR as it was.
# Needs root (chroot, mounts in a private mount namespace).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "${here}/.." && pwd)
cache=${OVERTIME_CACHE:-/var/cache/overtime}/images
debs=${repo}/bin/deb
# Where recipes are looked up (a site may keep its own recipes outside the checkout).
recipes=${OVERTIME_RECIPES:-${here}/recipes}
SUITE=bookworm
# zstd level of root.squashfs. 15 (the default) makes the smallest image for the boot
# servers to sync and the PCs to read; 3, which tests and the demo use, squashes the
# desktop flavour's 1.7 GB tree with a thirtieth of the CPU time for a file about 15%
# larger (docs/benchmarks/images.md). Part of the image key: the bytes differ.
zstd_level=${OVERTIME_SQUASHFS_LEVEL:-15}
case "${zstd_level}" in
[1-9] | 1[0-9] | 2[0-2]) ;;
*) echo "images: OVERTIME_SQUASHFS_LEVEL=${zstd_level}: not a zstd level (1-22)" >&2; exit 1 ;;
esac

die() {
	echo "images: $*" >&2
	exit 1
}

if [ "${1:-}" = --debs ]; then
	debs=$(cd "${2:?--debs DIR}" && pwd)
	shift 2
fi
keyonly='' listonly=''
case "${1:-}" in
--key) keyonly=1 && shift ;;
--list) keyonly=1 listonly=1 && shift ;;
esac
[ $# -eq $((keyonly ? 1 : 2)) ] || die "usage: $0 [--debs DIR] RECIPE OUTDIR | [--debs DIR] --key|--list RECIPE"
recipe=$1
case "${recipe}" in
"" | *[!a-z0-9-]*) die "recipe name ${recipe}: letters, digits and - only" ;;
esac
[ -f "${recipes}/${recipe}/recipe" ] || die "no recipe ${recipe} (${recipes}: $(cd "${recipes}" && echo *))"

# The chain of recipes, parent first (desktop: desktop-minimal desktop).
chain=
r=${recipe}
while [ -n "${r}" ]; do
	case " ${chain} " in *" ${r} "*) die "recipe ${r}: its PARENT chain loops" ;; esac
	[ -f "${recipes}/${r}/recipe" ] || die "recipe ${recipe}: parent ${r} does not exist"
	chain="${r} ${chain}"
	# shellcheck disable=SC1090
	r=$(PARENT='' && . "${recipes}/${r}/recipe" && echo "${PARENT:-}")
done

# The recipe variables, the parents' package lists included; the nearest KERNEL wins.
KERNEL='' PACKAGES_ALL='' OVERTIME_ALL='' SITE_DEBS_ALL='' SLURM_FOR=''
for r in ${chain}; do
	PARENT='' PACKAGES='' OVERTIME_PACKAGES='' SITE_DEBS='' OVERTIME_SLURM_FOR=''
	# shellcheck disable=SC1090
	. "${recipes}/${r}/recipe"
	PACKAGES_ALL="${PACKAGES_ALL} ${PACKAGES}"
	OVERTIME_ALL="${OVERTIME_ALL} ${OVERTIME_PACKAGES}"
	# SITE_DEBS: directories of the site's own .debs (every *.deb in them), installed
	# with Overtime's in stage 2, in place of Debian's packages of the same names.
	for d in ${SITE_DEBS}; do
		[ -d "${d}" ] || die "recipe ${r}: SITE_DEBS ${d}: no such directory"
		SITE_DEBS_ALL="${SITE_DEBS_ALL} ${d}"
	done
	# OVERTIME_SLURM_FOR: the nearest recipe's.
	[ -z "${OVERTIME_SLURM_FOR}" ] || SLURM_FOR=${OVERTIME_SLURM_FOR}
done
# shellcheck disable=SC2086
PACKAGES_ALL=$(printf '%s\n' ${PACKAGES_ALL} ${KERNEL} | LC_ALL=C sort -u | tr '\n' ' ')
# shellcheck disable=SC2086
OVERTIME_ALL=$(printf '%s\n' ${OVERTIME_ALL} | LC_ALL=C sort -u | tr '\n' ' ')

# SOURCE_DATE_EPOCH: given, else the last commit that touched the recipe chain, else 0.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=0
	paths=
	for r in ${chain}; do paths="${paths} ${recipes}/${r}"; done
	# shellcheck disable=SC2086
	t=$(git -C "${repo}" log -1 --format=%ct -- ${paths} 2>/dev/null || true)
	[ -z "${t}" ] || SOURCE_DATE_EPOCH=${t}
fi
export SOURCE_DATE_EPOCH

filehash() { sha256sum <"$1" | cut -c1-64; }

# depends FILE: the packages the .deb FILE depends on, one name per line (first
# alternative, no version, no architecture qualifier).
depends() {
	{
		dpkg-deb -f "$1" Pre-Depends
		dpkg-deb -f "$1" Depends
	} | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/:[a-z0-9]*//; s/^ *//; s/ *$//' | grep -v '^$' || true
}

# Overtime's packages: the newest .deb of each in ${debs}, and of the Overtime packages
# they depend on (overtime-agent needs overtime-initramfs): dpkg -i installs no
# dependencies itself.
deb_files=
wanted=${OVERTIME_ALL}
OVERTIME_ALL=
while [ -n "${wanted}" ]; do
	next=
	for p in ${wanted}; do
		case " ${OVERTIME_ALL} " in *" ${p} "*) continue ;; esac
		# shellcheck disable=SC2012
		f=$(ls -t "${debs}/${p}"_*_amd64.deb "${debs}/${p}"_*_all.deb 2>/dev/null | head -n 1 || true)
		[ -n "${f}" ] || die "no ${p}_*.deb in ${debs}: run make deb first"
		deb_files="${deb_files} ${f}"
		OVERTIME_ALL="${OVERTIME_ALL} ${p}"
		next="${next} $(depends "${f}" | grep '^overtime' || true)"
	done
	# shellcheck disable=SC2086,SC2116 # package names (no spaces), trimmed
	wanted=$(echo ${next})
done
# overtime-slurm for the site's Slurm (OVERTIME_SLURM_FOR): built from the one above, in a
# directory removed at exit.
slurm_tmp=
if [ -n "${SLURM_FOR}" ]; then
	case " ${OVERTIME_ALL} " in
	*" overtime-slurm "*) ;;
	*) die "recipe ${recipe}: OVERTIME_SLURM_FOR without overtime-slurm in OVERTIME_PACKAGES" ;;
	esac
	slurm_tmp=$(mktemp -d)
	trap 'rm -rf "${slurm_tmp}"' EXIT
	kept=
	for f in ${deb_files}; do
		case "$(basename "${f}")" in
		overtime-slurm_*)
			# Its messages only for a build (--key and --list print what they say they
			# print) or when it fails.
			if f=$("${repo}/scripts/site-slurm-deb.sh" "${SLURM_FOR}" "${f}" "${slurm_tmp}/debs" 2>"${slurm_tmp}/log"); then
				[ -n "${keyonly}" ] || cat "${slurm_tmp}/log" >&2
			else
				cat "${slurm_tmp}/log" >&2
				die "recipe ${recipe}: no overtime-slurm for the Slurm in ${SLURM_FOR} (scripts/site-slurm-deb.sh, above)"
			fi
			;;
		esac
		kept="${kept} ${f}"
	done
	deb_files=${kept}
fi
# The site's .debs: every *.deb of the SITE_DEBS directories, newest first when one
# package is there twice (a rebuild), by name.
site_names=
for d in ${SITE_DEBS_ALL}; do
	n=0
	# shellcheck disable=SC2012
	for f in $(ls -t "${d}"/*.deb 2>/dev/null || true); do
		case "${f}" in *[[:space:]]*) die "SITE_DEBS ${d}: ${f}: a file name with a space" ;; esac
		p=$(dpkg-deb -f "${f}" Package 2>/dev/null) || die "SITE_DEBS ${d}: $(basename "${f}") is not a .deb"
		n=$((n + 1))
		case " ${site_names} " in *" ${p} "*) continue ;; esac
		site_names="${site_names} ${p}"
		deb_files="${deb_files} ${f}"
	done
	[ "${n}" -gt 0 ] || die "SITE_DEBS ${d}: no .deb files"
done
# What Overtime's and the site's packages depend on goes into the base (first
# alternative, no version, no architecture qualifier), less what they are themselves, so
# that dpkg -i in stage 2 needs no network and the base changes only when a package's
# dependencies do. A site's package replaces Debian's of its name.
deps=$(for f in ${deb_files}; do depends "${f}"; done | grep -v '^overtime' || true)
# shellcheck disable=SC2086
PACKAGES_ALL=$(printf '%s\n' ${PACKAGES_ALL} ${deps} | LC_ALL=C sort -u | tr '\n' ' ')
if [ -n "${site_names}" ]; then
	kept=
	for p in ${PACKAGES_ALL}; do
		case " ${site_names} " in *" ${p} "*) ;; *) kept="${kept}${p} " ;; esac
	done
	PACKAGES_ALL=${kept}
fi

# Stage-1 inputs. The stage-1 part of this script is between the markers below; only it
# goes into the key, so that editing stage 2 does not rebuild the base.
stage1_code=$(sed -n '/^# >>> stage 1/,/^# <<< stage 1/p' "$0")
base_key=$({
	echo "suite ${SUITE}"
	echo "packages ${PACKAGES_ALL}"
	echo "mmdebstrap $(mmdebstrap --version 2>/dev/null || echo none)"
	printf '%s\n' "${stage1_code}"
} | sha256sum | cut -c1-16)

image_key=$({
	echo "base ${base_key}"
	echo "epoch ${SOURCE_DATE_EPOCH}"
	echo "zstd ${zstd_level}"
	for f in ${deb_files}; do echo "deb $(basename "${f}") $(filehash "${f}")"; done
	for r in ${chain}; do
		# -L: a recipe may link a file of another (bench-seat's autologin is
		# bench-desktop's); its content is what goes into the image.
		(cd "${recipes}" && find -L "${r}" -type f | LC_ALL=C sort) | while read -r f; do
			echo "file ${f} $(stat -c %a "${recipes}/${f}") $(filehash "${recipes}/${f}")"
		done
	done
	sed -n '/^# >>> stage 2/,/^# <<< stage 2/p' "$0"
} | sha256sum | cut -c1-16)

if [ -n "${listonly}" ]; then
	for p in ${PACKAGES_ALL}; do echo "debian ${p}"; done
	for f in ${deb_files}; do echo "deb ${f}"; done
	exit 0
fi
if [ -n "${keyonly}" ]; then
	echo "${image_key}"
	exit 0
fi
out=$2

up_to_date() {
	[ -f "${out}/manifest.json" ] && grep -q "\"key\": \"${image_key}\"" "${out}/manifest.json" &&
		(cd "${out}" && sha256sum --quiet -c SHA256SUMS >/dev/null 2>&1)
}
if up_to_date; then
	echo "images: ${recipe} is up to date in ${out} (key ${image_key})" >&2
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (chroot, mounts)"
for tool in mmdebstrap mksquashfs unshare flock chroot sha256sum tar; do
	command -v "${tool}" >/dev/null || die "${tool} not found (Debian packages: mmdebstrap, squashfs-tools, util-linux, coreutils, tar)"
done
mkdir -p "${cache}/base"
exec 9>"${cache}/.${recipe}.lock"
flock 9
if up_to_date; then
	exit 0
fi
start=$(date +%s)
tmp=$(mktemp -d "${cache}/.build-${recipe}.XXXXXX")
trap 'rm -rf "${tmp}" ${slurm_tmp:+"${slurm_tmp}"}' EXIT

# >>> stage 1: the Debian base, one mmdebstrap run (no recommends: the recipe lists what
# the image needs), cached as a tarball.
# Named by the key alone: recipes with the same package lists share a base.
base=${cache}/base/${base_key}.tar
base_built=cached
if [ ! -f "${base}" ]; then
	echo "images: ${recipe}: mmdebstrap ${SUITE} (${PACKAGES_ALL})" >&2
	# shellcheck disable=SC2086
	mmdebstrap --quiet --variant=minbase --aptopt='APT::Install-Recommends "false"' \
		--include="$(echo ${PACKAGES_ALL} | tr ' ' ',')" \
		--customize-hook="chroot \"\$1\" apt-get clean" \
		"${SUITE}" "${tmp}/base.tar" >&2
	mv "${tmp}/base.tar" "${base}"
	base_built=built
fi
# <<< stage 1
# Bases not used for a week go (each is several hundred MB); this one was just used.
touch "${base}"
find "${cache}/base" -maxdepth 1 -name '*.tar' -mtime +7 -delete 2>/dev/null || true
base_done=$(date +%s)

# >>> stage 2: Overtime's packages, the recipe's customize scripts, initrd, squashfs.
root=${tmp}/root
mkdir -p "${root}" "${tmp}/out"
tar -C "${root}" --numeric-owner -xpf "${base}"
mkdir -p "${root}/tmp/overtime-debs"
for f in ${deb_files}; do cp "${f}" "${root}/tmp/overtime-debs/"; done
# In a private mount namespace: /proc, /sys and /dev for dpkg's maintainer scripts and
# mkinitramfs; policy-rc.d keeps them from starting services in the build host.
cat >"${root}/usr/sbin/policy-rc.d" <<'POLICY'
#!/bin/sh
exit 101
POLICY
chmod 0755 "${root}/usr/sbin/policy-rc.d"
export OVERTIME_RECIPE=${recipe}
recipe_dirs=
for r in ${chain}; do recipe_dirs="${recipe_dirs} ${recipes}/${r}"; done
# shellcheck disable=SC2086 # recipe directories have no spaces (checked names)
# shellcheck disable=SC2016
unshare --mount --propagation private /bin/sh -eu -c '
	root=$1; shift
	mount -t proc proc "${root}/proc"
	mount --rbind /sys "${root}/sys"
	mount --rbind /dev "${root}/dev"
	chroot "${root}" /bin/sh -c "DEBIAN_FRONTEND=noninteractive dpkg -i /tmp/overtime-debs/*.deb" >&2
	for r in "$@"; do
		for s in "${r}"/customize.d/*.sh; do
			[ -f "${s}" ] || continue
			echo "images: ${OVERTIME_RECIPE}: $(basename "${r}")/customize.d/$(basename "${s}")" >&2
			/bin/sh -eu "${s}" "${root}" >&2
		done
	done
	# The initrd with boot=overtime (hooks and scripts from the overtime-initramfs package)
	# and its configuration: only the modules the boot needs.
	kver=$(ls "${root}/lib/modules" | sort -V | tail -n 1)
	if [ -n "${kver}" ] && [ -d "${root}/usr/share/overtime/initramfs" ]; then
		chroot "${root}" mkinitramfs -d /usr/share/overtime/initramfs -o /boot/overtime-initrd.img "${kver}" >&2
	elif [ -n "${kver}" ]; then
		chroot "${root}" mkinitramfs -o /boot/overtime-initrd.img "${kver}" >&2
	fi
' sh "${root}" ${recipe_dirs}

kver=$(find "${root}/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -V | tail -n 1 || true)
artefacts="root.squashfs manifest.json"
if [ -n "${kver}" ]; then
	cp "${root}/boot/vmlinuz-${kver}" "${tmp}/out/vmlinuz"
	mv "${root}/boot/overtime-initrd.img" "${tmp}/out/initrd.img"
	artefacts="vmlinuz initrd.img ${artefacts}"
fi

# What the image carries, for the manifest (before the package database's caches go).
# shellcheck disable=SC2016
chroot "${root}" dpkg-query -W -f '${Package}\t${Version}\t${Installed-Size}\n' | LC_ALL=C sort >"${tmp}/packages.tsv"

# No state and no secrets in a published image: a machine-id is made at every boot
# (empty file: systemd treats the first boot of every boot as such), host keys, logs,
# caches and the build's leftovers go.
rm -rf "${root}/tmp/overtime-debs" "${root}/usr/sbin/policy-rc.d" "${root}/var/cache/apt/"*.bin \
	"${root}/var/lib/apt/lists/"* "${root}/var/log/"*.log "${root}/var/log/apt" "${root}/etc/ssh/ssh_host_"* \
	"${root}/boot/initrd.img-"* "${root}/var/cache/debconf/"*-old "${root}/var/lib/dpkg/"*-old
: >"${root}/etc/machine-id"
rm -f "${root}/var/lib/dbus/machine-id"

# SOURCE_DATE_EPOCH: mksquashfs (4.5+) takes it for the file system and every file time.
mksquashfs "${root}" "${tmp}/out/root.squashfs" -noappend -comp zstd -Xcompression-level "${zstd_level}" \
	-no-progress -quiet >&2

# The manifest: what was built, from what, when, with every artefact's size and sha256.
{
	printf '{\n  "recipe": "%s",\n  "key": "%s",\n  "baseKey": "%s",\n' "${recipe}" "${image_key}" "${base_key}"
	printf '  "chain": [%s],\n' "$(for r in ${chain}; do printf '"%s",' "${r}"; done | sed 's/,$//')"
	printf '  "recipeRevision": "%s",\n' "$(git -C "${repo}" log -1 --format=%H -- images/recipes 2>/dev/null || echo unknown)"
	printf '  "suite": "%s",\n  "kernel": "%s",\n' "${SUITE}" "${kver}"
	printf '  "sourceDateEpoch": %s,\n' "${SOURCE_DATE_EPOCH}"
	printf '  "built": "%s",\n' "$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)"
	printf '  "files": {\n'
	first=1
	for f in vmlinuz initrd.img root.squashfs; do
		[ -f "${tmp}/out/${f}" ] || continue
		[ -n "${first}" ] || printf ',\n'
		first=
		printf '    "%s": {"size": %s, "sha256": "%s"}' "${f}" "$(stat -c %s "${tmp}/out/${f}")" "$(filehash "${tmp}/out/${f}")"
	done
	printf '\n  },\n  "packages": [\n'
	awk -F '\t' '{ printf "%s    {\"name\": \"%s\", \"version\": \"%s\", \"installedKiB\": %d}", (NR > 1 ? ",\n" : ""), $1, $2, $3 + 0 } END { print "" }' "${tmp}/packages.tsv"
	printf '  ]\n}\n'
} >"${tmp}/out/manifest.json"
# shellcheck disable=SC2086
(cd "${tmp}/out" && sha256sum ${artefacts} | LC_ALL=C sort -k2 >SHA256SUMS)
chmod 0755 "${tmp}/out"
chmod 0644 "${tmp}/out"/*
# <<< stage 2

mkdir -p "$(dirname "${out}")"
rm -rf "${out}.old"
[ ! -e "${out}" ] || mv "${out}" "${out}.old"
mv "${tmp}/out" "${out}"
rm -rf "${out}.old"
end=$(date +%s)
echo "images: built ${recipe} in ${out} (key ${image_key}; base ${base_built} in $((base_done - start)) s, image in $((end - base_done)) s)" >&2
