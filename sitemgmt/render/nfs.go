package render

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"path"
	"sort"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/names"
)

// Export_Id range used for image exports. Ganesha's ids are 16 bit and 0 is the pseudo
// root; ids above the range are left for exports an administrator adds by hand.
const (
	exportIDMin   = 1
	exportIDRange = 60000
)

// published is one image version to export.
type published struct {
	image   string
	version *model.ImageVersion
	id      uint16
}

// publishedVersions lists every version of every image of the site, sorted by image name,
// then creation time, then version, after checking the values that are written.
func publishedVersions(site *model.Site) ([]published, error) {
	if site == nil {
		return nil, errorf("nfs: no site")
	}
	if err := checkName("site", site.Name); err != nil {
		return nil, err
	}
	var out []published
	paths := map[string]string{}
	for i := range site.Images {
		im := &site.Images[i]
		if err := checkName("image", im.Name); err != nil {
			return nil, err
		}
		for j := range im.Versions {
			v := &im.Versions[j]
			if err := checkImageVersion(v); err != nil {
				return nil, errorf("image %s: %v", im.Name, err)
			}
			// Two versions in one directory would be one export with two ids (and
			// two pseudo paths); that is a broken catalogue, not something to render.
			if other, ok := paths[v.Path]; ok {
				return nil, errorf("image %s version %s: path %s is also used by %s", im.Name, v.Version, v.Path, other)
			}
			paths[v.Path] = im.Name + " " + v.Version
			out = append(out, published{image: im.Name, version: v})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.image != b.image {
			return a.image < b.image
		}
		if !a.version.Created.Equal(b.version.Created) {
			return a.version.Created.Before(b.version.Created)
		}
		return a.version.Version < b.version.Version
	})
	return out, nil
}

// assignExportIDs gives every version an Export_Id derived from a hash of its Path.
//
// Why a hash and not a counter: NFS file handles contain the export id, so a booted PC's
// mounted root.squashfs goes stale if its export's id changes. An ordinal over the sorted
// list would renumber every later export whenever a version is added in between or an old
// one is deleted; a hash of the (immutable) directory depends on nothing else, so the id
// of a version is the same in every render for as long as it exists.
//
// Collisions (likely once a few hundred versions exist, the space is 16 bit) are resolved
// by linear probing in order of creation time, oldest first: the older version keeps its
// id and the new one, which no client has mounted yet, moves to the next free id. An id
// can only change when the older of two colliding versions is deleted while the newer is
// still mounted. A stored id per version (model.ImageVersion) would remove even that.
func assignExportIDs(vs []published) {
	order := make([]int, len(vs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		va, vb := vs[order[a]].version, vs[order[b]].version
		if !va.Created.Equal(vb.Created) {
			return va.Created.Before(vb.Created)
		}
		return va.Path < vb.Path
	})
	used := map[uint16]bool{}
	for _, i := range order {
		sum := sha256.Sum256([]byte(vs[i].version.Path))
		n := binary.BigEndian.Uint32(sum[:4]) % exportIDRange
		for used[uint16(exportIDMin+n)] {
			n = (n + 1) % exportIDRange
		}
		vs[i].id = uint16(exportIDMin + n)
		used[vs[i].id] = true
	}
}

// Ganesha writes one nfs-ganesha EXPORT block per published image version: read-only,
// root squashed, NFSv3 and v4 over TCP with AUTH_SYS, from the VFS FSAL. Path is
// exportRoot/PATH (exportRoot "" = the server's NFS root, else DefaultNFSRoot), and the
// NFSv4 Pseudo path is the same path, so that one kernel command line
// (KernelCommandLine, SERVER:/EXPORT/PATH) mounts over NFSv3 and v4, and the same line
// works against kernel nfsd (/etc/exports, where v4 paths are the real paths).
// See assignExportIDs for why Export_Id is stable across renders.
func Ganesha(out io.Writer, site *model.Site, server *model.BootServer, exportRoot string) error {
	if err := checkServer(server); err != nil {
		return err
	}
	if exportRoot == "" {
		exportRoot = nfsRootDir(server)
	}
	if err := checkAbsPath("export root", exportRoot); err != nil {
		return err
	}
	vs, err := publishedVersions(site)
	if err != nil {
		return err
	}
	assignExportIDs(vs)

	w := &writer{}
	w.comment(generated)
	w.comment("nfs-ganesha exports of the published images of site " + site.Name + " on boot server " + server.Name + ".")
	w.comment("Include it from ganesha.conf (%include). Image versions are immutable: read-only exports.")
	w.comment("Export_Id is a hash of the version's directory, so it stays the same across renders.")
	for _, p := range vs {
		w.line("")
		w.line("EXPORT {")
		w.line("\t# image %s version %s", p.image, p.version.Version)
		w.line("\tExport_Id = %d;", p.id)
		w.line("\tPath = \"%s\";", path.Join(exportRoot, p.version.Path))
		w.line("\tPseudo = \"%s\";", path.Join(exportRoot, p.version.Path))
		w.line("\tAccess_Type = RO;")
		w.line("\tSquash = Root_Squash;")
		w.line("\tProtocols = 3, 4;")
		w.line("\tTransports = TCP;")
		w.line("\tSecType = sys;")
		w.line("\tFSAL {")
		w.line("\t\tName = VFS;")
		w.line("\t}")
		w.line("}")
	}
	if len(vs) == 0 {
		w.comment("No published image versions.")
	}
	return w.flush(out)
}

// Exports writes the /etc/exports variant for the kernel NFS server: one line per image
// version directory, `PATH CLIENTS(ro,root_squash,no_subtree_check,sync)`. clients is one
// exports(5) client specification (a network like 10.0.0.0/24, a host, a wildcard or an
// @netgroup). exportRoot "" means DefaultNFSRoot.
func Exports(out io.Writer, site *model.Site, exportRoot string, clients string) error {
	if exportRoot == "" {
		exportRoot = DefaultNFSRoot
	}
	if err := checkAbsPath("export root", exportRoot); err != nil {
		return err
	}
	if err := names.NFSClients(clients); err != nil {
		return errorf("%v", err)
	}
	vs, err := publishedVersions(site)
	if err != nil {
		return err
	}
	w := &writer{}
	w.comment(generated)
	w.comment("Kernel nfsd exports of the published images of site " + site.Name + "; apply with \"exportfs -ra\".")
	w.comment("Image versions are immutable: read-only, root squashed.")
	for _, p := range vs {
		w.line("%s %s(ro,root_squash,no_subtree_check,sync)", path.Join(exportRoot, p.version.Path), clients)
	}
	if len(vs) == 0 {
		w.comment("No published image versions.")
	}
	return w.flush(out)
}
