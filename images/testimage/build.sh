#!/bin/sh
# Build the Overtime test image into OUTDIR: a Debian cloud kernel (vmlinuz), an initrd made
# by the real mkinitramfs from this repository's boot/initramfs configuration, and a tiny
# busybox root (root.squashfs), plus a manifest. Small on purpose: QEMU boot tests under
# TCG take seconds with it, not minutes.
#
#   images/testimage/build.sh OUTDIR   build (nothing to do when OUTDIR is up to date)
#   images/testimage/build.sh --key    print the cache key of the current inputs
#
# The key covers this script, the image's init, every file of boot/initramfs (content and
# mode), the kernel version and the versions of the Debian packages that go into the
# initrd; OUTDIR/manifest records it. Downloads and builds are cached under
# ${OVERTIME_CACHE:-<repo>/.cache}; concurrent builds are serialised with flock.
# Needs root (mkinitramfs runs in a private mount namespace that shows the extracted
# kernel's modules at /lib/modules/VERSION; nothing is installed into the host).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "${here}/../.." && pwd)
conf=${repo}/boot/initramfs
cache=${OVERTIME_CACHE:-${repo}/.cache}

die() {
	echo "testimage: $*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: $0 OUTDIR | --key"

for tool in apt-cache apt-get dpkg-deb dpkg-query depmod modprobe mkinitramfs lsinitramfs mksquashfs unshare flock sha256sum ldd; do
	command -v "${tool}" >/dev/null 2>&1 ||
		die "${tool} not found (Debian packages: apt, dpkg, kmod, initramfs-tools-core, squashfs-tools, util-linux, coreutils)"
done
[ -x /bin/busybox ] || die "/bin/busybox not found (Debian package busybox-static)"

# The kernel package linux-image-cloud-amd64 currently depends on (apt-get update first
# for a newer one).
kpkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-cloud-amd64\)$/\1/p' | head -n 1)
[ -n "${kpkg}" ] || die "apt-cache cannot resolve linux-image-cloud-amd64 (run apt-get update)"
kver=${kpkg#linux-image-}

# Kernel modules of the root (not of the initrd), for tests that boot the image: evdev for
# the node agent's input sensor (the AT keyboard's /dev/input/event*; the cloud kernel has
# INPUT_EVDEV=m and no uinput), overlay for the guest backends. The init loads them.
ROOT_MODULES="evdev overlay"

# The inputs, one line each, for the cache key.
inputs() {
	echo "kernel ${kver}"
	echo "root modules ${ROOT_MODULES}"
	dpkg-query -W -f '${Package} ${Version}\n' initramfs-tools-core klibc-utils busybox-static nfs-common udev kmod squashfs-tools crun 2>/dev/null || true
	for f in "${here}/build.sh" "${here}/init"; do
		echo "file ${f#"${repo}"/} $(stat -c %a "${f}") $(sha256sum <"${f}" | cut -d' ' -f1)"
	done
	(cd "${repo}" && find boot/initramfs -type f ! -name '*.go' ! -name '*.md' | LC_ALL=C sort) | while read -r f; do
		echo "file ${f} $(stat -c %a "${repo}/${f}") $(sha256sum <"${repo}/${f}" | cut -d' ' -f1)"
	done
}
key=$(inputs | sha256sum | cut -c1-16)

if [ "$1" = --key ]; then
	echo "${key}"
	exit 0
fi
out=$1

up_to_date() {
	[ -f "${out}/manifest" ] && grep -qx "KEY=${key}" "${out}/manifest" &&
		[ -f "${out}/vmlinuz" ] && [ -f "${out}/initrd.img" ] && [ -f "${out}/root.squashfs" ]
}
if up_to_date; then
	exit 0
fi

[ "$(id -u)" -eq 0 ] || die "must run as root (mkinitramfs in a private mount namespace)"
mkdir -p "${cache}"
exec 9>"${cache}/.testimage.lock"
flock 9
# Another build may have finished while this one waited for the lock.
if up_to_date; then
	exit 0
fi

tmp=$(mktemp -d "${cache}/.testimage.XXXXXX")
trap 'rm -rf "${tmp}"' EXIT

# 1. The kernel package, downloaded and unpacked once per version.
kdir=${cache}/kernel/${kver}
if [ ! -f "${kdir}/.complete" ]; then
	echo "testimage: downloading ${kpkg}" >&2
	mkdir -p "${tmp}/deb" "${cache}/kernel"
	# apt's download sandbox user (_apt) cannot write into a root-owned temporary directory.
	(cd "${tmp}/deb" && apt-get -q -o APT::Sandbox::User=root download "${kpkg}" >&2)
	deb=$(ls "${tmp}/deb/${kpkg}"_*.deb)
	dpkg-deb -x "${deb}" "${tmp}/kernel"
	# Module dependency files: the package's postinst would make them; mkinitramfs would
	# otherwise run depmod on the (absent) host directory.
	depmod -b "${tmp}/kernel" "${kver}"
	dpkg-deb -f "${deb}" Version >"${tmp}/kernel/.package-version"
	touch "${tmp}/kernel/.complete"
	rm -rf "${kdir}"
	mv "${tmp}/kernel" "${kdir}"
fi
[ -f "${kdir}/boot/vmlinuz-${kver}" ] || die "${kdir} has no boot/vmlinuz-${kver}"
kpkgver=$(cat "${kdir}/.package-version")

mkdir -p "${tmp}/out"
cp "${kdir}/boot/vmlinuz-${kver}" "${tmp}/out/vmlinuz"

# 2. The initrd: the real mkinitramfs with this repository's configuration, in a private
# mount namespace in which /lib/modules/VERSION and /boot are the extracted package's.
# /usr/lib gets a throwaway overlay there, because the host may have no /lib/modules to
# mount over.
echo "testimage: mkinitramfs -d boot/initramfs for ${kver}" >&2
mkdir -p "${tmp}/ovl/upper" "${tmp}/ovl/work"
# shellcheck disable=SC2016
unshare --mount --propagation private /bin/sh -eu -c '
	mount -t overlay overlay -o "lowerdir=/usr/lib,upperdir=$1/ovl/upper,workdir=$1/ovl/work" /usr/lib
	mkdir -p "/usr/lib/modules/$3"
	mount --bind "$2/lib/modules/$3" "/usr/lib/modules/$3"
	mount --bind "$2/boot" /boot
	TMPDIR="$1" mkinitramfs -d "$4" -o "$1/out/initrd.img" "$3"
' sh "${tmp}" "${kdir}" "${kver}" "${conf}" >&2

# What the boot needs must be in it: fail here rather than in a VM.
lsinitramfs "${tmp}/out/initrd.img" >"${tmp}/initrd.list"
for f in virtio_net.ko virtio_pci.ko nfsv3.ko nfsv4.ko squashfs.ko overlay.ko loop.ko \
	scripts/overtime scripts/overtime.d/30-nfs scripts/overtime.d/65-identity scripts/init-bottom/overtime sbin/mount.nfs \
	sbin/blkid vfat.ko nls_cp437.ko nls_ascii.ko virtio_blk.ko etc/netconfig; do
	grep -q "${f}\$" "${tmp}/initrd.list" || die "the initrd lacks ${f}"
done

# 3. The root: busybox-static, the test init, a marker file.
r=${tmp}/rootfs
mkdir -p "${r}/bin" "${r}/sbin" "${r}/usr/bin" "${r}/usr/sbin" "${r}/etc" "${r}/proc" \
	"${r}/sys" "${r}/dev" "${r}/run" "${r}/tmp" "${r}/root" "${r}/var" "${r}/mnt"
chmod 1777 "${r}/tmp"
cp /bin/busybox "${r}/bin/busybox"
cp "${here}/init" "${r}/sbin/init"
chmod 0755 "${r}/bin/busybox" "${r}/sbin/init"
for applet in $(/bin/busybox --list-full); do
	[ -e "${r}/${applet}" ] || ln -s /bin/busybox "${r}/${applet}"
done
# crun, the OCI runtime the node agent's container backend runs guests with, and the
# shared libraries it needs (the root has no C library of its own otherwise).
[ -x /usr/bin/crun ] || die "/usr/bin/crun not found (Debian package crun)"
cp /usr/bin/crun "${r}/usr/bin/crun"
ldd /usr/bin/crun | awk '/=> \// { print $3 } /^\t\// { print $1 }' | while read -r lib; do
	mkdir -p "${r}$(dirname "${lib}")"
	cp -L "${lib}" "${r}${lib}"
done
echo "root:x:0:0:root:/root:/bin/sh" >"${r}/etc/passwd"
echo "root:x:0:" >"${r}/etc/group"
echo "overtime-test-image ${key}" >"${r}/etc/overtime-test-image"
# The root's kernel modules with their dependencies (modprobe resolves them in the
# extracted package), in load order in lib/modules/VERSION/overtime.load for the init's
# insmod, plus depmod's files so that modprobe works in the image too.
mods=${kdir}/lib/modules/${kver}
: >"${tmp}/load"
for m in ${ROOT_MODULES}; do
	modprobe -d "${kdir}" -S "${kver}" --show-depends "${m}" >"${tmp}/deps" ||
		die "module ${m} is not in ${kpkg}"
	sed -n "s|^insmod ${mods}/\([^ ]*\).*|\1|p" "${tmp}/deps" >>"${tmp}/load"
done
[ -s "${tmp}/load" ] || die "no module files for ${ROOT_MODULES}"
mkdir -p "${r}/lib/modules/${kver}"
awk '!seen[$0]++' "${tmp}/load" >"${r}/lib/modules/${kver}/overtime.load"
while read -r f; do
	mkdir -p "$(dirname "${r}/lib/modules/${kver}/${f}")"
	cp "${mods}/${f}" "${r}/lib/modules/${kver}/${f}"
done <"${r}/lib/modules/${kver}/overtime.load"
cp "${mods}/modules.builtin" "${mods}/modules.order" "${r}/lib/modules/${kver}/"
depmod -b "${r}" "${kver}"
# Fixed times: the same inputs give the same image and checksum.
mksquashfs "${r}" "${tmp}/out/root.squashfs" -noappend -all-root -comp xz -no-progress \
	-mkfs-time 0 -all-time 0 >/dev/null

# 4. The manifest, then the directory into place in one rename.
{
	echo "KEY=${key}"
	echo "KERNEL_PACKAGE=${kpkg}"
	echo "KERNEL_PACKAGE_VERSION=${kpkgver}"
	echo "KERNEL_VERSION=${kver}"
	echo "ROOT_MODULES=${ROOT_MODULES}"
	echo "ROOT_SHA256=$(sha256sum <"${tmp}/out/root.squashfs" | cut -d' ' -f1)"
	echo "ROOT_SIZE=$(stat -c %s "${tmp}/out/root.squashfs")"
	echo "INITRD_SIZE=$(stat -c %s "${tmp}/out/initrd.img")"
} >"${tmp}/out/manifest"
chmod 0755 "${tmp}/out"
chmod 0644 "${tmp}/out"/*
mkdir -p "$(dirname "${out}")"
if [ -e "${out}" ]; then
	mv "${out}" "${tmp}/old"
fi
mv "${tmp}/out" "${out}"
echo "testimage: built ${out} (kernel ${kver}, key ${key})" >&2
