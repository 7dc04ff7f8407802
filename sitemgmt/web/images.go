package web

// Images: the catalogue of images and their versions (docs/publishing.md), where each
// version is verified, what uses it, and switching the current version (`overtime image
// current`, PUT /api/v1/images/{name}/current) — the same operation,
// service.Images.SetCurrent, authorised like the API's: a site admin for any image, a
// course-vm image's pool admins and lecturers for that image (authz.fieldRights
// "current").

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/overtime-hpc/overtime/vocab/model"
	"github.com/overtime-hpc/overtime/vocab/wire"
)

func (u *UI) imageRoutes() {
	m := u.mux
	m.HandleFunc("GET "+Prefix+"images", u.page(u.imageList))
	m.HandleFunc("GET "+Prefix+"images/{name}", u.page(u.imageDetail))
	m.HandleFunc("POST "+Prefix+"images/{name}/current", u.page(u.imageCurrent))
	m.HandleFunc("POST "+Prefix+"images/{name}/rollback", u.page(u.imageRollback))
}

// ImageRow is one image in the list.
type ImageRow struct {
	Name, Kind, Description, Pool string
	Current                       string // what unpinned references boot ("" : no version)
	Explicit                      bool   // Current set by `image current` (else the newest)
	Versions                      int
}

type imagesPage struct {
	Page
	Images []ImageRow
}

// mayShowImage: course-vm images only to who may see their pool (the UI shows a pool's
// things to its roles); the site's desktop and compute images to everyone.
func mayShowImage(q *Req, im *model.Image) bool {
	if im.Kind == model.ImageCourseVM && im.Pool != "" {
		return MaySeePool(q.P, im.Pool)
	}
	return true
}

// MaySwitchImage reports whether the UI offers q's user to switch im's current version
// (the server's authz.Check decides): site admins; for course-vm images the pool admins
// and lecturers of its pool.
func MaySwitchImage(q *Req, im *model.Image) bool {
	if q.P.SiteAdmin {
		return true
	}
	return im.Kind == model.ImageCourseVM && im.Pool != "" && (q.P.PoolAdmin[im.Pool] || q.P.Lecturer[im.Pool])
}

func (u *UI) imageList(q *Req) {
	pg := imagesPage{Page: u.Base(q, "Images", "images")}
	for i := range q.Snap.Site.Images {
		im := &q.Snap.Site.Images[i]
		if !mayShowImage(q, im) {
			continue
		}
		r := ImageRow{Name: im.Name, Kind: string(im.Kind), Description: im.Description, Pool: im.Pool,
			Explicit: im.Current != "", Versions: len(im.Versions)}
		if v := im.Version(""); v != nil {
			r.Current = v.Version
		}
		pg.Images = append(pg.Images, r)
	}
	u.Render(q, http.StatusOK, "images", pg)
}

// VersionRow is one version on an image's page.
type VersionRow struct {
	wire.ImageVersionStatus
	SizeText string
	Previous bool // the version a rollback switches to
}

type imagePage struct {
	Page
	Image     *model.Image
	Current   string
	Explicit  bool
	Versions  []VersionRow // newest first
	UsedBy    []string
	CanSwitch bool
	Rollback  string // the version before the current one ("" : none)
	FormErr   string
}

// imageUsers lists what references image: modes booting it, starting it as the course
// VM, running it as the compute guest (with pins), as model.CheckDeletedReferences names
// them.
func imageUsers(site *model.Site, image string) []string {
	var out []string
	for _, use := range site.ImageUses(image) {
		pin := ""
		if use.Pin != "" {
			pin = ", pinned to " + use.Pin
		}
		if use.As == model.UseBoot {
			out = append(out, fmt.Sprintf("mode %s (%s) %s%s", use.Mode.Name, use.Mode.Kind, use.As, pin))
		} else {
			out = append(out, fmt.Sprintf("mode %s %s%s", use.Mode.Name, use.As, pin))
		}
	}
	return out
}

// previousVersion is what a rollback switches to: the version published before the
// current one (nil: the current is the oldest, or there is none).
func previousVersion(im *model.Image) *model.ImageVersion {
	cur := im.Version("")
	if cur == nil {
		return nil
	}
	var prev *model.ImageVersion
	for i := range im.Versions {
		v := &im.Versions[i]
		if v.Created.Before(cur.Created) && (prev == nil || v.Created.After(prev.Created)) {
			prev = v
		}
	}
	return prev
}

func sizeText(n int64) string {
	switch {
	case n <= 0:
		return "—"
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func (u *UI) imageOf(q *Req) *model.Image {
	im := q.Snap.Site.Image(q.PathValue("name"))
	if im == nil || !mayShowImage(q, im) {
		u.Fail(q, http.StatusNotFound, "no image "+q.PathValue("name"))
		return nil
	}
	return im
}

// imageFor is the image a POST names, visible or not: the change's authorisation
// answers a user who may not switch it (403), as the API does.
func (u *UI) imageFor(q *Req) *model.Image {
	im := q.Snap.Site.Image(q.PathValue("name"))
	if im == nil {
		u.Fail(q, http.StatusNotFound, "no image "+q.PathValue("name"))
	}
	return im
}

func (u *UI) imageDetail(q *Req) {
	if im := u.imageOf(q); im != nil {
		u.renderImage(q, im, http.StatusOK, "")
	}
}

func (u *UI) renderImage(q *Req, im *model.Image, status int, formErr string) {
	pg := imagePage{Page: u.Base(q, "Image "+im.Name, "images"), Image: im, Explicit: im.Current != "",
		UsedBy: imageUsers(q.Snap.Site, im.Name), CanSwitch: MaySwitchImage(q, im), FormErr: formErr}
	prev := previousVersion(im)
	if prev != nil {
		pg.Rollback = prev.Version
	}
	for _, st := range u.svc.Images.ImageStatus(im.Name, u.opt.BootServer, q.Now) {
		pg.Current = st.Current
		for _, v := range st.Versions {
			pg.Versions = append(pg.Versions, VersionRow{ImageVersionStatus: v, SizeText: sizeText(v.Size),
				Previous: prev != nil && prev.Version == v.Version})
		}
	}
	sort.SliceStable(pg.Versions, func(i, j int) bool { return pg.Versions[i].Created.After(pg.Versions[j].Created) })
	u.Render(q, status, "image", pg)
}

// setCurrent switches im's current version to version ("": follow the newest) as q's
// user, as PUT /api/v1/images/{name}/current does.
func (u *UI) setCurrent(q *Req, name, version, done string) {
	changes, err := u.svc.Images.SetCurrent(q.Context(), q.P.Check, false, name, version)
	if u.opt.OnWrite != nil {
		u.opt.OnWrite(false, changes, err)
	}
	if err != nil {
		status, msg := ErrorStatus(err)
		u.imageErr(q, q.Snap.Site.Image(name), status, msg)
		return
	}
	u.Done(q, Prefix+"images/"+name, done)
}

func (u *UI) imageCurrent(q *Req) {
	im := u.imageFor(q)
	if im == nil {
		return
	}
	v := q.PostFormValue("version")
	msg := "image " + im.Name + " now boots version " + v
	if v == "" {
		msg = "image " + im.Name + " now follows its newest version"
	}
	u.setCurrent(q, im.Name, v, msg)
}

func (u *UI) imageRollback(q *Req) {
	im := u.imageFor(q)
	if im == nil {
		return
	}
	prev := previousVersion(im)
	if prev == nil {
		u.imageErr(q, im, http.StatusConflict, "nothing to roll back to: the current version is the oldest")
		return
	}
	// The form names the version it showed: a page older than a switch does not roll
	// back further than the user saw.
	if want := q.PostFormValue("version"); want != "" && want != prev.Version {
		u.imageErr(q, im, http.StatusConflict, "the image changed since the page was loaded; check the versions and try again")
		return
	}
	u.setCurrent(q, im.Name, prev.Version, "image "+im.Name+" rolled back to version "+prev.Version)
}

// imageErr answers a refused POST: on the image's page next to its forms, or, for an
// image the user may not see, on an error page that shows nothing of it.
func (u *UI) imageErr(q *Req, im *model.Image, status int, msg string) {
	if im != nil && mayShowImage(q, im) {
		u.renderImage(q, im, status, msg)
		return
	}
	u.Fail(q, status, msg)
}
