package web

// imageRoutes registers the pages of images.go (to be built).
func (u *UI) imageRoutes() {}
