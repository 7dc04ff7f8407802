package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/overtime-hpc/overtime/images/artefact"
	"github.com/overtime-hpc/overtime/images/vmspec"
	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/internal/testenv/bootsector"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// TestImageImport: `overtime image import` end to end against a site manager with an
// image store: a lecturer creates a course-vm image of their pool and publishes a VM;
// a lecturer of another pool, a refused disk and a desktop image publish nothing.
func TestImageImport(t *testing.T) {
	env := testenv.New(t, testenv.Options{API: api.Options{ImagesDir: t.TempDir()}})
	env.ApplyExample(t)
	if err := env.Admin().Send("PUT", "/api/v1/roles/lab-b-lecturers", nil,
		model.RoleGrant{Name: "lab-b-lecturers", Role: model.RoleLecturer, Pool: "lab-b", Members: []string{"eve"}}, nil); err != nil {
		t.Fatal(err)
	}
	as := func(user string, args ...string) (string, error) {
		t.Setenv("OVERTIME_PASSWORD", user+"-secret")
		return run(t, newRoot(), append([]string{"--server", env.HTTP.URL, "--user", user}, args...)...)
	}
	src := t.TempDir()
	disk := filepath.Join(src, "chem.raw")
	if err := os.WriteFile(disk, bootsector.Disk("CHEM\r\n", 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := as("carol", "image", "import", disk, "--image", "chem-vm", "--pool", "lab-a", "--version", "ws2026-1", "--memory", "1024")
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	if !strings.Contains(out, "created course-vm image chem-vm for pool lab-a") || !strings.Contains(out, "+ image-version chem-vm/ws2026-1") {
		t.Errorf("output:\n%s", out)
	}
	dir := filepath.Join(env.ImagesDir, "chem-vm", "ws2026-1")
	if files, err := artefact.Verify(dir); err != nil || len(files) != 2 {
		t.Fatalf("published version: %v %v", files, err)
	}
	vm, err := vmspec.Read(dir)
	if err != nil || vm.MemoryMB != 1024 || vm.Source != "raw" || vm.Disk != vmspec.DiskFile {
		t.Fatalf("vm.json: %+v %v", vm, err)
	}
	var im model.Image
	if _, err := env.Admin().Get("/api/v1/images/chem-vm", nil, &im); err != nil || im.Kind != model.ImageCourseVM || im.Pool != "lab-a" || im.Version("ws2026-1") == nil {
		t.Fatalf("image: %+v %v", im, err)
	}

	// Importing the same version again: refused (immutable), the store unchanged.
	if out, err := as("carol", "image", "import", disk, "--image", "chem-vm", "--version", "ws2026-1"); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("second import of ws2026-1: %v\n%s", err, out)
	}
	if _, err := artefact.Verify(dir); err != nil {
		t.Errorf("published version after a refused import: %v", err)
	}
	// A lecturer of lab-b neither creates images in lab-a nor imports into them.
	if _, err := as("eve", "image", "import", disk, "--image", "chem-vm", "--version", "ws2026-2"); err == nil || !strings.Contains(err.Error(), "pool lab-a") {
		t.Errorf("eve importing into lab-a: %v", err)
	}
	if _, err := as("eve", "image", "import", disk, "--image", "eve-vm", "--pool", "lab-a"); err == nil {
		t.Error("eve created an image in lab-a")
	}
	// A disk with a backing file: refused before anything is uploaded.
	evil := filepath.Join(src, "evil.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-f", "qcow2", "-b", "/etc/shadow", "-F", "raw", evil, "1M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if _, err := as("carol", "image", "import", evil, "--image", "chem-vm", "--version", "ws2026-3"); err == nil || !strings.Contains(err.Error(), "backing file") {
		t.Errorf("backing file: %v", err)
	}
	// Not a course-vm image.
	if _, err := as("admin", "image", "import", disk, "--image", "debian-desktop"); err == nil || !strings.Contains(err.Error(), "desktop image") {
		t.Errorf("desktop image: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(env.ImagesDir, ".incoming", "*", "*")); len(left) != 0 {
		t.Errorf("refused imports left staged uploads: %v", left)
	}
	if _, err := os.Stat(filepath.Join(env.ImagesDir, "chem-vm", "ws2026-3")); err == nil {
		t.Error("a refused import has a version directory")
	}
}
