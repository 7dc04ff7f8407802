// Package initramfs holds the tests of Overtime's initramfs-tools configuration (the shell
// files in this directory, see README.md): QEMU boots of the test image
// (images/testimage) with direct kernel boot against nfs-ganesha in a network namespace,
// and host-side runs of the boot script's fragments under busybox sh. There is no Go code
// to import here.
package initramfs
