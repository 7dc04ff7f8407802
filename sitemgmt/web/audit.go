package web

// auditRoutes registers the pages of audit.go (to be built).
func (u *UI) auditRoutes() {}
