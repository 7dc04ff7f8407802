package model

import (
	"path"
	"strings"
)

// The directory of an image version, in the site manager's image store and below every
// boot server's export root, is IMAGE/VERSION: derived from the names, never chosen by
// whoever publishes the version. A stated path could otherwise name another image's
// directory, the store's staging area (.incoming) or a directory that holds other
// versions, and `overtime image gc` and the boot servers delete a removed version's
// directory. Image names and versions are single path segments that start with a letter
// or digit (names.Name, names.Version), so derived paths never nest in each other and
// never reach a dot directory.

// VersionPath is the directory of version of image, relative to the image store.
func VersionPath(image, version string) string { return image + "/" + version }

// PathsOverlap: store paths a and b (slash-separated, relative) are the same directory
// or one is inside the other, so that deleting or replacing one touches the other. The
// one rule gc (sitemgmt/imagestore) and boot servers (boot/bootserver) keep another
// version's directory by.
func PathsOverlap(a, b string) bool {
	a, b = path.Clean(a), path.Clean(b)
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/") || a == "." || b == "."
}

// normalizeVersionPaths fills in the derived path of every version written without one
// (Normalize): a client need not state what the server derives.
func (s *Site) normalizeVersionPaths() {
	for i := range s.Images {
		im := &s.Images[i]
		for j := range im.Versions {
			if v := &im.Versions[j]; v.Path == "" {
				v.Path = VersionPath(im.Name, v.Version)
			}
		}
	}
}

// CheckVersionPaths refuses a write (cur → next) that adds a version, or changes a
// version's path, to anything but the derived IMAGE/VERSION. It judges only what the
// write changes: versions an earlier release stored with another path keep loading and
// keep their path (Validate does not refuse them, so such a site still starts and takes
// other writes); gc drops them from the catalogue without deleting a directory it cannot
// prove is theirs (imagestore.RemoveVersions). service.Update calls it on every write:
// the API, the web UI and site files alike.
func CheckVersionPaths(cur, next *Site) error {
	for i := range next.Images {
		im := &next.Images[i]
		var old *Image
		if cur != nil {
			old = cur.Image(im.Name)
		}
		for _, v := range im.Versions {
			want := VersionPath(im.Name, v.Version)
			if v.Path == want {
				continue
			}
			if old != nil {
				if ov := old.Version(v.Version); ov != nil && ov.Path == v.Path {
					continue // stored so by an earlier release: kept as it is
				}
			}
			return invalid("image %s version %s: path %q is not the version's own directory: a version lives in %s (state that path or none)", im.Name, v.Version, v.Path, want)
		}
	}
	return nil
}
