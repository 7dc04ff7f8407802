package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// mountSquashfs mounts the squashfs image file read-only at target through a loop device
// set up with autoclear: the kernel detaches the device when the last mount of it goes
// away, which is when the container's mount namespace dies. Nothing is left behind on the
// host, whoever ends the container. The device node is made in nodeDir (the container's
// private tmpfs), so this does not depend on udev having created /dev/loopN.
func mountSquashfs(file, target, nodeDir string) error {
	img, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("base image: %w", err)
	}
	defer img.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("loop devices: %w", err)
	}
	defer ctl.Close()
	var lastErr error
	for try := 0; try < 32; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("loop devices: LOOP_CTL_GET_FREE: %w", err)
		}
		node := filepath.Join(nodeDir, fmt.Sprintf("loop%d", n))
		_ = os.Remove(node)
		if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(7, uint32(n)))); err != nil {
			return fmt.Errorf("loop devices: mknod %s: %w", node, err)
		}
		dev, err := os.OpenFile(node, os.O_RDONLY, 0)
		if err != nil {
			return fmt.Errorf("loop devices: %w", err)
		}
		err = configureLoop(dev, img, file)
		if errors.Is(err, unix.EBUSY) { // another user took it between GET_FREE and here
			dev.Close()
			lastErr = err
			continue
		}
		if err != nil {
			dev.Close()
			return fmt.Errorf("loop devices: attach %s to loop%d: %w", file, n, err)
		}
		// The open device keeps it attached until the mount holds it.
		err = unix.Mount(node, target, "squashfs", unix.MS_RDONLY|unix.MS_NODEV|unix.MS_NOSUID, "")
		dev.Close()
		if err != nil {
			return fmt.Errorf("mount squashfs %s (loop%d) on %s: %w", file, n, target, err)
		}
		return nil
	}
	return fmt.Errorf("loop devices: no free device after 32 tries: %w", lastErr)
}

func configureLoop(dev, img *os.File, name string) error {
	info := unix.LoopInfo64{Flags: unix.LO_FLAGS_READ_ONLY | unix.LO_FLAGS_AUTOCLEAR}
	copy(info.File_name[:len(info.File_name)-1], name)
	cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Info: info}
	err := unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
	if err == nil || !(errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY)) {
		return err
	}
	// Kernels before 5.8: two steps.
	if err := unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_FD, int(img.Fd())); err != nil {
		return err
	}
	if err := unix.IoctlLoopSetStatus64(int(dev.Fd()), &info); err != nil {
		_ = unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0)
		return err
	}
	return nil
}
