package web

// scheduleRoutes registers the pages of schedule.go (to be built).
func (u *UI) scheduleRoutes() {}
