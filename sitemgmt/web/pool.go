package web

// poolRoutes registers the pages of pool.go (to be built).
func (u *UI) poolRoutes() {}
