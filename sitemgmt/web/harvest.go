package web

// harvestRoutes registers the pages of harvest.go (to be built).
func (u *UI) harvestRoutes() {}
