package api

import (
	"net/http"

	"github.com/overtime-hpc/overtime/images/diskcheck"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// checkCourseVM asks images/diskcheck whether the files staged in dir may be published as
// version of course-VM image; it answers the request itself when not: a refusal is 400
// naming the image, version, file and reason; a failure of the check is 500 and logged
// (its detail may name the store's directories, which the answer never does).
func (s *Server) checkCourseVM(w http.ResponseWriter, r *http.Request, image, version, dir string, files []string) bool {
	err := diskcheck.CourseVMVersion(r.Context(), dir, files, diskcheck.Options{})
	if err == nil {
		return true
	}
	if diskcheck.IsRefusal(err) {
		s.opt.Log.Info("course VM refused", "user", principal(r).UID, "image", image, "version", version, "reason", err)
		s.httpError(w, model.Invalid("image %s version %s: %v", image, version, err))
		return false
	}
	s.opt.Log.Error("checking a course VM's disks", "image", image, "version", version, "err", err)
	writeError(w, http.StatusInternalServerError, "image "+image+" version "+version+": the disks could not be checked (the server's log says why); nothing was published")
	return false
}
