package web

// lecturerRoutes registers the pages of lecturer.go (to be built).
func (u *UI) lecturerRoutes() {}
