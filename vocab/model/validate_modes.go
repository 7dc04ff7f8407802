package model

import "github.com/overtime-hpc/overtime/vocab/names"

// The validators of modes and images (see Site.Validate for their order).

// validateModeNames checks every mode's name and collects them: images are checked
// before the rest of the modes, and the site's choices and exceptions name modes.
func (s *Site) validateModeNames(ix *siteIndex) error {
	ix.modes = map[string]*Mode{}
	for i := range s.Modes {
		m := &s.Modes[i]
		if err := ValidName("mode", m.Name); err != nil {
			return err
		}
		if ix.modes[m.Name] != nil {
			return conflict("duplicate mode %q", m.Name)
		}
		ix.modes[m.Name] = m
	}
	return nil
}

// validateImages checks every image and its versions, and collects them for the modes.
func (s *Site) validateImages(ix *siteIndex) error {
	ix.images = map[string]*Image{}
	for i := range s.Images {
		im := &s.Images[i]
		if err := ValidName("image", im.Name); err != nil {
			return err
		}
		if ix.images[im.Name] != nil {
			return conflict("duplicate image %q", im.Name)
		}
		ix.images[im.Name] = im
		if err := validateImage(im); err != nil {
			return err
		}
	}
	return nil
}

// validateImage checks an image's fields and versions, and that its current version is
// one of them.
func validateImage(im *Image) error {
	if !oneOf(im.Kind, ImageKinds) {
		return invalid("image %s: unknown kind %q (use one of %v)", im.Name, im.Kind, ImageKinds)
	}
	if err := validText("image description", im.Description); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, v := range im.Versions {
		if names.Version(v.Version) != nil {
			return invalid("image %s: invalid version %q", im.Name, v.Version)
		}
		if seen[v.Version] {
			return conflict("image %s: duplicate version %q", im.Name, v.Version)
		}
		seen[v.Version] = true
		if names.SHA256(v.SHA256) != nil {
			return invalid("image %s version %s: sha256 must be 64 lower-case hex digits", im.Name, v.Version)
		}
		if err := ValidRelPath("image "+im.Name+" version "+v.Version, v.Path); err != nil {
			return err
		}
		if v.Size < 0 {
			return invalid("image %s version %s: negative size", im.Name, v.Version)
		}
	}
	if im.Current != "" && !seen[im.Current] {
		return invalid("image %s: current version %q is not a version of it", im.Name, im.Current)
	}
	return nil
}

// validateModes checks every mode's fields and the images it boots, mode by mode.
func (s *Site) validateModes(ix *siteIndex) error {
	for i := range s.Modes {
		m := &s.Modes[i]
		for _, validate := range []func(*Mode, *siteIndex) error{
			validateModeFields,
			validateModeImage,
			validateModeVM,
			validateModeBoot,
			validateModeGuest,
		} {
			if err := validate(m, ix); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateModeFields checks a mode's kind, description, kernel arguments and the paths of
// its own kernel and initrd.
func validateModeFields(m *Mode, _ *siteIndex) error {
	if !oneOf(m.Kind, ModeKinds) {
		return invalid("mode %s: unknown kind %q (use one of %v)", m.Name, m.Kind, ModeKinds)
	}
	if err := validText("mode description", m.Description); err != nil {
		return err
	}
	if err := ValidKernelArgs(m.KernelArgs); err != nil {
		return invalid("mode %s: %v", m.Name, err)
	}
	for _, p := range []struct{ what, v string }{{"kernel", m.Kernel}, {"initrd", m.Initrd}} {
		if p.v != "" {
			if err := ValidRelPath("mode "+m.Name+" "+p.what, p.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateModeImage checks the desktop image a mode boots (and its pinned version), or
// that a mode that boots none names none.
func validateModeImage(m *Mode, ix *siteIndex) error {
	if m.Kind.NeedsImage() && (m.Image != "" || m.Kind != KindMaintenance) {
		im := ix.images[m.Image]
		if im == nil {
			return invalid("mode %s: unknown image %q", m.Name, m.Image)
		}
		if im.Kind != ImageDesktop {
			return invalid("mode %s: boots image %s, which is a %s image, not a desktop image", m.Name, im.Name, im.Kind)
		}
		if m.ImageVersion != "" && im.Version(m.ImageVersion) == nil {
			return invalid("mode %s: image %s has no version %q", m.Name, m.Image, m.ImageVersion)
		}
	} else if m.Image != "" {
		return invalid("mode %s: a %s mode boots no image", m.Name, m.Kind)
	}
	return nil
}

// validateModeVM checks the course VM image of a course-vm mode, or that no other mode
// names one.
func validateModeVM(m *Mode, ix *siteIndex) error {
	if m.Kind == KindCourseVM {
		vm := ix.images[m.VM]
		if vm == nil {
			return invalid("mode %s: unknown course VM image %q", m.Name, m.VM)
		}
		if vm.Kind != ImageCourseVM {
			return invalid("mode %s: vm %s is a %s image, not a course-vm image", m.Name, vm.Name, vm.Kind)
		}
	} else if m.VM != "" {
		return invalid("mode %s: only course-vm modes start a VM", m.Name)
	}
	return nil
}

// validateModeBoot checks that a local-disk mode, which boots the PC's own disk, sets
// nothing of a network boot.
func validateModeBoot(m *Mode, _ *siteIndex) error {
	if m.Kind == KindLocalDisk && (m.Kernel != "" || m.Initrd != "" || m.KernelArgs != "") {
		return invalid("mode %s: a local-disk mode takes no kernel, initrd or kernel arguments", m.Name)
	}
	return nil
}

// validateModeGuest checks a mode's compute guest: only desktop and cluster modes run
// one, and its image is a compute (or course-vm) image with the pinned version.
func validateModeGuest(m *Mode, ix *siteIndex) error {
	g := m.Guest
	if g == nil {
		return nil
	}
	if m.Kind != KindDesktop && m.Kind != KindCluster {
		return invalid("mode %s: only desktop and cluster modes run a compute guest, not a %s mode", m.Name, m.Kind)
	}
	if err := g.Validate(); err != nil {
		return invalid("mode %s: %v", m.Name, err)
	}
	im := ix.images[g.Image]
	if im == nil {
		return invalid("mode %s: guest: unknown image %q", m.Name, g.Image)
	}
	if im.Kind != ImageCompute && im.Kind != ImageCourseVM {
		return invalid("mode %s: guest: image %s is a %s image, not a compute (or course-vm) image", m.Name, im.Name, im.Kind)
	}
	if g.Version != "" && im.Version(g.Version) == nil {
		return invalid("mode %s: guest: image %s has no version %q", m.Name, g.Image, g.Version)
	}
	return nil
}
