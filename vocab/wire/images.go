package wire

import "time"

// Image distribution (docs/publishing.md): boot servers pull published image versions
// from the site manager's store, verify them and report what they hold.

// BootImage names one image version with what a boot server needs to fetch and check it.
type BootImage struct {
	Image   string `json:"image"`
	Version string `json:"version"`
	Path    string `json:"path,omitempty"`   // directory below the image tree
	SHA256  string `json:"sha256"`           // of the root image (model.ImageVersion.SHA256)
	Size    int64  `json:"size,omitempty"`   // of the root image
	Reason  string `json:"reason,omitempty"` // why the boot server should hold it (wanted list)
}

// Key is "IMAGE/VERSION" (neither part can contain '/').
func (b BootImage) Key() string { return b.Image + "/" + b.Version }

// BootImages is GET /api/v1/bootservers/{name}/images: the versions the boot server should
// hold (Wanted) and, as last reported, holds verified (Held).
type BootImages struct {
	Server   string      `json:"server"`
	Wanted   []BootImage `json:"wanted"`
	Held     []BootImage `json:"held"`
	Reported time.Time   `json:"reported,omitempty"` // zero: never reported (not gated)
}

// BootImagesReport is POST /api/v1/bootservers/{name}/images: every version the boot
// server holds verified now (a full list: what it no longer lists, it no longer holds).
type BootImagesReport struct {
	Held []BootImage `json:"held"`
}

// ImageStatus is one image's versions and where they are (GET /api/v1/distribution).
type ImageStatus struct {
	Name     string               `json:"name"`
	Kind     string               `json:"kind"`
	Current  string               `json:"current"`  // what unpinned references boot now
	Explicit bool                 `json:"explicit"` // Current was set by `image current` (else: newest)
	Versions []ImageVersionStatus `json:"versions"`
}

// ImageVersionStatus is one version: sizes, and on which boot servers it is verified or
// still missing (among those that should hold it and report).
type ImageVersionStatus struct {
	Image      string    `json:"image,omitempty"` // set in GCResult.Kept
	Version    string    `json:"version"`
	Path       string    `json:"path"`
	SHA256     string    `json:"sha256"`
	Size       int64     `json:"size,omitempty"`
	Created    time.Time `json:"created"`
	Current    bool      `json:"current,omitempty"`
	VerifiedOn []string  `json:"verifiedOn,omitempty"`
	MissingOn  []string  `json:"missingOn,omitempty"` // wanted there, not (yet) verified
	// Blockers: what keeps `overtime image gc` from removing it (empty: removable).
	Blockers []string `json:"blockers,omitempty"`
}

// GCResult is POST /api/v1/images/gc: the versions removed (or, in a dry run, that would
// be) and those kept with what blocks them.
type GCResult struct {
	DryRun  bool                 `json:"dryRun"`
	Removed []BootImage          `json:"removed"`
	Kept    []ImageVersionStatus `json:"kept"`
	// FilesRemoved lists version directories deleted from this server's store.
	FilesRemoved []string `json:"filesRemoved,omitempty"`
}
