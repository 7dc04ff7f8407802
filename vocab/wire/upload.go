package wire

// Uploading an image version's artefacts (docs/course-vms.md): the CLI streams each file
// with PUT /api/v1/images/{image}/versions/{version}/files/{name}, then publishes the
// version with POST /api/v1/images/{image}/versions/{version}/publish.

// UploadedFile is the answer to an upload: what the site manager stored, checksummed
// while it streamed the body to disk.
type UploadedFile struct {
	Image   string `json:"image"`
	Version string `json:"version"`
	Name    string `json:"name"`
	SHA256  string `json:"sha256"`
	Size    int64  `json:"size"`
}

// PublishRequest is the body of POST .../versions/{version}/publish.
type PublishRequest struct {
	// Files lists the artefacts the client uploaded; when given, the staged version must
	// hold exactly these (a lost upload is refused instead of published).
	Files []string `json:"files,omitempty"`
	// Root is the artefact whose sha256 and size the version records (model.ImageVersion):
	// default root.squashfs when staged, else disk.qcow2 (a course VM), else the only file.
	Root string `json:"root,omitempty"`
}
