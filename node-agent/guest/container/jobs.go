package container

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/overtime-hpc/overtime/node-agent/guest"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// What the guest gives the site's users' jobs (docs/slurm.md "Users, storage and MPI in
// guests"): their own ids, mapped unchanged in the guest's user namespace beside the
// guest's own block, and the cluster's NFS file systems, mounted by the monitor in the
// guest's private mount namespace and bound into the guest.

// checkJobs refuses job id ranges that would meet the guest's own block at uidBase (the
// site manager checks them against the default block; a backend may run another) and
// storage the site manager would not have accepted.
func checkJobs(s guest.Spec, uidBase uint32) error {
	own := model.IDRange{First: uidBase, Last: uidBase + idRange - 1}
	for _, kind := range []struct {
		name   string
		ranges []model.IDRange
	}{{"uids", s.JobUIDs}, {"gids", s.JobGIDs}} {
		if len(kind.ranges) > 300 {
			return fmt.Errorf("%d job %s ranges (the kernel maps at most 340)", len(kind.ranges), kind.name)
		}
		for _, r := range kind.ranges {
			if r.First < idRange || (r.First <= own.Last && own.First <= r.Last) {
				return fmt.Errorf("job %s range %s meets the desktop's own ids or the guest's block %s", kind.name, r, own)
			}
		}
	}
	if len(s.JobUIDs) > 0 != (len(s.JobGIDs) > 0) {
		return fmt.Errorf("job users need both uid and gid ranges")
	}
	return model.ValidateGuestStorage(s.Storage)
}

// idMappings is the guest's user namespace: its own ids 0..65535 at uidBase, and each
// job range unchanged.
func idMappings(uidBase uint32, jobs []model.IDRange) []specs.LinuxIDMapping {
	m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: uidBase, Size: idRange}}
	for _, r := range jobs {
		m = append(m, specs.LinuxIDMapping{ContainerID: r.First, HostID: r.First, Size: uint32(r.Count())})
	}
	return m
}

// storageParent holds the cluster's file systems in the monitor's mount namespace (under
// the tmpfs on rootParent: the guest's root must reach them to bind them).
const storageParent = rootParent + "/storage"

func storageSource(i int) string { return filepath.Join(storageParent, strconv.Itoa(i)) }

// storageMounts binds the mounted file systems into the guest: read-write, no set-id
// programs, no devices.
func storageMounts(list []model.GuestStorage) []specs.Mount {
	var out []specs.Mount
	for i, st := range list {
		out = append(out, specs.Mount{Destination: st.Path, Type: "bind", Source: storageSource(i),
			Options: []string{"rbind", "rw", "nosuid", "nodev"}})
	}
	return out
}

// storageMountTimeout bounds one mount: an unreachable server fails the guest's start
// with the mount named, instead of a guest whose jobs fail on a missing home.
var storageMountTimeout = 30 * time.Second

// mountStorage mounts the cluster's file systems in the monitor's mount namespace, as the
// desktop's root: the NFS client then sends each job's own uid and gids (unchanged by the
// mapping), and the guest's root is the unprivileged GuestRootIDBase to the server.
// mount(8) with mount.nfs does what NFSv3 needs (mountd, locking) and picks the version.
func mountStorage(list []model.GuestStorage) error {
	for i, st := range list {
		dir := storageSource(i)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), storageMountTimeout)
		// retry=0: one attempt (mount.nfs retries for 2 minutes by default).
		// nosharecache: the guest's mount gets an NFS superblock and cache of its own,
		// never shared with the desktop's mounts of the same server (the seat user's
		// home): what the guest reads stays out of the desktop's cache and the other way
		// round, and the desktop's mount at a login is its own, gone at the logout.
		cmd := exec.CommandContext(ctx, "mount", "-t", "nfs", "-o", "nosuid,nodev,nosharecache,retry=0", st.Server+":"+st.Export, dir)
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %s", storageMountTimeout)
		}
		cancel()
		if err != nil {
			msg := strings.Join(strings.Fields(string(out)), " ")
			if msg != "" {
				msg = ": " + msg
			}
			return fmt.Errorf("cluster storage %s: mount failed: %v%s", st, err, msg)
		}
	}
	return nil
}
