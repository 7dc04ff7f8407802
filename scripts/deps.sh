#!/usr/bin/env bash
# Install every Debian package and Go module the project needs. Idempotent and quiet when
# everything is present: it only calls apt-get when a package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Packages by purpose (keep in step with README "Requirements"):
#   slapd ldap-utils       the one store, and its tools (tests, demo; the demo's university
#                          directory is filled with ldapadd, its password hashed by slappasswd)
#   openssl                the demo's university directory: a CA and its ldaps certificate
#   dnsmasq-base           DHCP/TFTP; `dnsmasq --test` checks rendered configs
#   wrk                    HTTP load generator for `make bench`
#   slurm-wlm munge        slurmctld checks the rendered node lines
#   nfs-ganesha(-vfs)      NFS server checks the rendered EXPORT blocks
#   ca-certificates git    Go module downloads
#   rpcbind nfs-common     NFSv3 next to ganesha (boot server, tests)
#   pxelinux syslinux-common ipxe   first-stage loaders the boot server hands out
#   qemu-system-x86 ipxe-qemu ovmf  PXE-booted VMs in tests and the demo (BIOS and UEFI)
#   initramfs-tools-core klibc-utils kmod cpio zstd busybox-static squashfs-tools
#                          the test image: real mkinitramfs with boot/initramfs, busybox root
#   socat curl             the demo's VM console and API calls
#   haproxy                the load balancer in front of site manager replicas (replica failover test)
#   netbase binutils shellcheck   /etc/protocols for the initrd; the KVM probe firmware; initramfs script checks
#   e2fsprogs dosfstools mtools   OVERTIME-ID test disks (ext4 and vfat made and filled without mounting)
#   libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-utils
#                          the node agent's QEMU/KVM guests (libvirtd, virsh, qemu-img overlays)
#   libxml2-utils          virt-xml-validate checks generated domain XML against libvirt's schema
#   passt                  NAT guests (libvirt user networking with port forwards)
#   crun                   the OCI runtime of the node agent's container guests (user namespace, seccomp)
#   libslurm-dev slurm-wlm-basic-plugins-dev libcurl4-openssl-dev libjson-c-dev lua5.1 gcc make
#                          scheduler-plugin: the sync daemon (libslurm) and the SPANK plugin
#                          (spank.h, libcurl, json-c); lua5.1 runs job_submit.lua's unit test
#   patchelf               images/siteslurm_test.go: Debian's libslurm under another release's
#                          SONAME, for the fake sites scripts/site-slurm-deb.sh links the sync daemon against
#   dbus-daemon systemd util-linux bsdutils   the agent's notices (dbus-daemon and busctl for
#                          the desktop-notification test; wall, setpriv)
#   debhelper lintian mmdebstrap   make deb (dpkg-buildpackage, debhelper compat 13), the
#                          lintian check of the .debs, the clean bookworm root the install test uses
#   chromium               headless browser for the web UI's tests (internal/testenv/browser)
#   sssd-ldap sssd-krb5 libnss-sss libpam-sss pamtester   a real sssd for the desktop-login
#                          tests (internal/testenv/sssdtest), run in a private mount namespace;
#                          pamtester drives PAM. libnss-sss/libpam-sss add `sss` to the host's
#                          nsswitch.conf and common-* PAM files: accepted, as without a running
#                          sssd (policy-rc.d keeps it from starting) it answers "unavailable" at once
#   krb5-kdc krb5-admin-server krb5-user   a real MIT KDC (internal/testenv/kdctest): krb5kdc
#                          and kdb5_util, kadmin.local, kinit/klist; krb5-config writes /etc/krb5.conf,
#                          which sssdtest binds a test's krb5.conf over
#   cups-daemon cups-client   a throwaway print server (internal/testenv/cupstest) and lp, for the
#                          desktops' printing configuration (cups-common's /etc/cups, which
#                          sssdtest binds a PC's client.conf over)
#   nftables               nft: the exam network's ruleset loaded in network namespaces (node-agent/examfw)
#   tesseract-ocr          reads the words on a booted PC's screen (internal/screen.Text): the
#                          greeter's notice is checked by what it says, not by its pixels
#   samba smbclient        a throwaway SMB home server (internal/testenv/smbtest) for CIFS homes,
#                          and the client its own test checks it with
#   openmpi-bin libopenmpi-dev   Open MPI 4.1 and PMIx 4 for the MPI test (test/slurm_mpi_test.go):
#                          mpicc builds the job on this machine, and the Slurm lab copies the
#                          runtime (libopenmpi3, libpmix2, libpmix-dev's libpmix.so that Slurm's
#                          mpi_pmix plugin dlopens) into its guest image (slurmlab Options.MPI)
#   tcpdump                records the Slurm lab's network (internal/testenv/wirecap): no token,
#                          password or munge key may cross it in clear
PKGS=(slapd ldap-utils openssl dnsmasq-base wrk slurm-wlm munge nfs-ganesha nfs-ganesha-vfs ca-certificates git
	rpcbind nfs-common pxelinux syslinux-common ipxe qemu-system-x86 ipxe-qemu ovmf
	initramfs-tools-core klibc-utils kmod cpio zstd busybox-static squashfs-tools socat curl haproxy
	shellcheck netbase binutils e2fsprogs dosfstools mtools
	libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-utils libxml2-utils passt crun
	libslurm-dev slurm-wlm-basic-plugins-dev libcurl4-openssl-dev libjson-c-dev lua5.1 gcc make patchelf
	debhelper lintian mmdebstrap dbus-daemon systemd util-linux bsdutils chromium
	sssd-ldap sssd-krb5 libnss-sss libpam-sss pamtester krb5-kdc krb5-admin-server krb5-user
	cups-daemon cups-client nftables tesseract-ocr samba smbclient openmpi-bin libopenmpi-dev tcpdump)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "deps: installing ${missing[*]}"
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	# slapd must not configure (and start) a system directory of its own: tests and the
	# demo run private ones.
	echo "slapd slapd/no_configuration boolean true" | $SUDO debconf-set-selections
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
	# policy-rc.d keeps package scripts from starting system services (munge, slapd,
	# ganesha, sssd, krb5kdc, kadmind, smbd) that tests would then collide with.
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
		$SUDO chmod +x /usr/sbin/policy-rc.d
		trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
	fi
	$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# No system sssd, KDC, kadmind, cupsd or smbd may run: tests start private ones, and a system sssd would
# answer the host's own lookups through the `sss` entries libnss-sss added. policy-rc.d kept
# the packages from starting them; this also covers a host where they were enabled and
# started anyway (systemd units and sockets at boot, a policy-rc.d that allowed it).
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [ -d /run/systemd/system ]; then
	for u in sssd.service sssd-nss.socket sssd-pam.socket sssd-pam-priv.socket sssd-autofs.socket \
		sssd-ssh.socket sssd-sudo.socket sssd-pac.socket krb5-kdc.service krb5-admin-server.service \
		cups.service cups.socket cups.path smbd.service nmbd.service samba-ad-dc.service; do
		if systemctl -q is-enabled "$u" 2>/dev/null || systemctl -q is-active "$u" 2>/dev/null; then
			echo "deps: disabling and stopping system $u"
			$SUDO systemctl disable -q --now "$u"
		fi
	done
else
	for s in sssd:sssd krb5kdc:krb5-kdc kadmind:krb5-admin-server cupsd:cups smbd:smbd nmbd:nmbd; do
		if pidof "${s%%:*}" >/dev/null && [ -x "/etc/init.d/${s#*:}" ]; then
			echo "deps: stopping system ${s%%:*}"
			$SUDO "/etc/init.d/${s#*:}" stop
		fi
	done
fi

# libvirtd looks up its compiled-in QEMU user before it reads qemu.conf (which tests set to
# root); the user comes with libvirt-daemon-system, which we do not install.
if ! getent passwd libvirt-qemu >/dev/null; then
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	getent group libvirt-qemu >/dev/null || $SUDO groupadd --system libvirt-qemu
	$SUDO useradd --system --no-create-home --home-dir /var/lib/libvirt --shell /usr/sbin/nologin -g libvirt-qemu libvirt-qemu
fi

command -v go >/dev/null || { echo "deps: Go toolchain not found (need Go >= $(sed -n 's/^go //p' go.mod))" >&2; exit 1; }
go mod download
