package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/overtime-hpc/overtime/images/vmimport"
	"github.com/overtime-hpc/overtime/internal/cmdline"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// imageImportCmd is `overtime image import`: a lecturer's VM becomes a published, read-only
// course-VM version (docs/lecturer-guide.md). The conversion runs here, on the
// lecturer's or administrator's machine (images/vmimport); the site manager only stores
// what arrives (streamed upload, SHA256SUMS, registration).
func imageImportCmd(g *globals) *cobra.Command {
	var (
		image, version, pool, desc, workDir string
		opt                                 vmimport.Options
		dry                                 bool
	)
	cmd := &cobra.Command{
		Use:   "import FILE --image NAME [--version V] [--pool POOL]",
		Short: "Import a VM (qcow2, raw, vmdk, OVF or OVA) as a new read-only course-VM version",
		Long: `Converts the VM in FILE to a course-VM version and publishes it: FILE is a disk image
(qcow2, raw, vmdk, vdi, vhdx, vpc: the format is detected, not taken from the name), an
OVF descriptor with its disk beside it, or an OVA. From an OVF the VM's name, OS type,
memory, CPUs and firmware are kept (flags override them). Disks that refer to other
files (backing files, external extents) are refused. The disk is converted to qcow2
with qemu-img (vmdk with --backend vmware), described in vm.json, uploaded to the site
manager as a stream, checksummed there (SHA256SUMS) and registered as version V of the
course-vm image NAME, which is created for --pool if it does not exist yet. Lecturers
may import into the course-vm images of their pools. Nothing is published when a step
fails: the upload is discarded and the input is never changed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if image == "" {
				return cmdline.Usagef("--image is required")
			}
			if err := model.ValidName("image", image); err != nil {
				return cmdline.Usage(err)
			}
			if version == "" {
				version = versionStamp(time.Now())
			}
			if err := names.Version(version); err != nil {
				return cmdline.Usage(err)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			errw := cmd.ErrOrStderr()
			// The image first: a lecturer learns that they may not import here before the
			// conversion of a large disk, not after it.
			created, err := ensureCourseImage(c, image, pool, desc, dry)
			if err != nil {
				return err
			}
			if created {
				fmt.Fprintf(errw, "created course-vm image %s for pool %s\n", image, pool)
			}
			work, err := os.MkdirTemp(workDir, "overtime-import-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(work)
			opt.Log = func(format string, a ...any) { fmt.Fprintf(errw, format+"\n", a...) }
			res, err := vmimport.Import(ctx, args[0], work, opt)
			if err != nil {
				return err
			}
			fmt.Fprintf(errw, "%s: %s, %d MiB memory, %d CPUs, %s firmware, disk %s (%d MiB)\n",
				res.VM.Name, orDash(res.VM.OSType), res.VM.MemoryMB, res.VM.CPUs, res.VM.Firmware, res.Disk, res.VM.DiskBytes>>20)
			return uploadAndPublish(cmd, g, c, image, version, res.Dir, res.Files, res.Disk, dry)
		},
	}
	f := cmd.Flags()
	f.StringVar(&image, "image", "", "course-vm image to publish the version of (created for --pool when missing)")
	f.StringVar(&version, "version", "", "version name (default: the UTC time, 2006.01.02-150405)")
	f.StringVar(&pool, "pool", "", "pool whose lecturers manage the image (needed to create it)")
	f.StringVar(&desc, "description", "", "description of a created image")
	f.StringVar(&workDir, "work-dir", "", "directory for the converted disk (default: $TMPDIR); needs room for the whole disk")
	f.BoolVar(&opt.Compress, "compress", false, "compress the qcow2 (smaller upload and store, slower first reads)")
	f.StringVar(&opt.Backend, "backend", "", "qemu (default) or vmware: run it in VMware Player where the PC has it (the disk is then a vmdk)")
	f.BoolVar(&opt.BootDiskOnly, "boot-disk-only", false, "an OVF with several disks: import only the first (boot) disk")
	f.StringVar(&opt.Name, "name", "", "name shown for the VM (default: the OVF's, else the file's)")
	f.StringVar(&opt.OSType, "os-type", "", "guest OS type (default: the OVF's)")
	f.IntVar(&opt.MemoryMB, "memory", 0, "memory in MiB (default: the OVF's, else 2048; a PC gives at most 75% of its own)")
	f.IntVar(&opt.CPUs, "cpus", 0, "virtual CPUs (default: the OVF's, else 2; at most the PC's)")
	f.StringVar(&opt.Firmware, "firmware", "", "bios or efi (default: the OVF's, else bios)")
	f.StringVar(&opt.DiskBus, "disk-bus", "", "sata (default), virtio or ide")
	f.StringVar(&opt.Network, "network", "", "nat (default: outbound only) or none")
	f.BoolVar(&dry, "dry-run", false, "convert and check, upload nothing")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func isNothingUploaded(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusBadRequest
}

// ensureCourseImage makes sure image is a course-vm image (of pool, when given),
// creating it for pool when it does not exist.
func ensureCourseImage(c *client.Client, image, pool, desc string, dry bool) (created bool, err error) {
	var im model.Image
	_, err = c.Get("/api/v1/images/"+url.PathEscape(image), nil, &im)
	var ae *client.APIError
	switch {
	case err == nil:
		if im.Kind != model.ImageCourseVM {
			return false, fmt.Errorf("image %s is a %s image; import makes versions of course-vm images", image, im.Kind)
		}
		if pool != "" && im.Pool != pool {
			return false, fmt.Errorf("image %s belongs to pool %s, not %s", image, im.Pool, pool)
		}
		return false, nil
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		if pool == "" {
			return false, cmdline.Usagef("image %s does not exist: give --pool to create it as a course-vm image of that pool", image)
		}
		q := url.Values{}
		if dry {
			q.Set("dryRun", "true")
		}
		if desc == "" {
			desc = "course VM"
		}
		err := c.Send(http.MethodPut, "/api/v1/images/"+url.PathEscape(image), q,
			model.Image{Name: image, Kind: model.ImageCourseVM, Pool: pool, Description: desc}, nil)
		return err == nil && !dry, err
	default:
		return false, err
	}
}

// uploadFile streams one artefact with progress on a terminal.
func uploadFile(ctx context.Context, c *client.Client, errw io.Writer, image, version, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	var r io.Reader = f
	if ef, ok := errw.(*os.File); ok && isTerminal(ef) && fi.Size() > 1<<20 {
		r = &client.ProgressReader{R: f, Report: func(n int64) {
			fmt.Fprintf(errw, "\ruploading %s: %3d%% (%d of %d MiB)", name, n*100/fi.Size(), n>>20, fi.Size()>>20)
		}}
		defer fmt.Fprintln(errw)
	}
	up, err := c.UploadImageFile(ctx, image, version, name, r, fi.Size())
	if err != nil {
		return err
	}
	fmt.Fprintf(errw, "uploaded %s: %d bytes, sha256 %s\n", name, up.Size, up.SHA256)
	return nil
}

// uploadAndPublish streams the named files of dir into the site manager's store as
// image/version and publishes them (root: the file the version records; "" for the
// server's default). A dry run asks the server whether the publication would be accepted.
// Whatever fails, nothing is published and nothing half-uploaded stays on the server.
func uploadAndPublish(cmd *cobra.Command, g *globals, c *client.Client, image, version, dir string, files []string, root string, dry bool) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	errw := cmd.ErrOrStderr()
	if dry {
		ch, err := c.PublishImageVersion(ctx, image, version, nil, "", true)
		if err != nil && !isNothingUploaded(err) {
			return err
		}
		if ch == nil {
			ch = &client.Changes{DryRun: true, Changes: []string{"+ image-version " + model.ImageVersionName(image, version)}}
		}
		return g.emitChanges(cmd.OutOrStdout(), *ch)
	}
	published := false
	defer func() {
		if !published {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if derr := c.DiscardUpload(dctx, image, version); derr != nil {
				fmt.Fprintf(errw, "warning: discarding the partial upload failed: %v\n", derr)
			}
		}
	}()
	for _, name := range files {
		if err := uploadFile(ctx, c, errw, image, version, filepath.Join(dir, name), name); err != nil {
			return err
		}
	}
	ch, err := c.PublishImageVersion(ctx, image, version, files, root, false)
	if err != nil {
		return err
	}
	published = true
	return g.emitChanges(cmd.OutOrStdout(), *ch)
}
