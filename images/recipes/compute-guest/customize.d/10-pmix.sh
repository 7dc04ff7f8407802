# shellcheck shell=sh
# compute-guest: PMIx for srun --mpi=pmix (run by images/build.sh with the root directory
# as $1, outside the chroot).
#
# Slurm's mpi_pmix plugin (Debian's slurm-wlm-basic-plugins) dlopens PMIx by its
# unversioned name, pmix2/lib/libpmix.so, which only libpmix-dev carries, with headers,
# a static library and three more -dev packages. The link is all the plugin needs; without
# it srun and slurmd say "pmi/pmix: can not load PMIx library".
root=$1
lib=${root}/usr/lib/x86_64-linux-gnu/pmix2/lib
if [ ! -e "${lib}/libpmix.so.2" ]; then
	echo "compute-guest: no ${lib#"${root}"}/libpmix.so.2 (package libpmix2)" >&2
	exit 1
fi
[ -e "${lib}/libpmix.so" ] || ln -s libpmix.so.2 "${lib}/libpmix.so"
