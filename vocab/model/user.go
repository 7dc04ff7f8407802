package model

// User is a directory user as the API lists it: the uid and the display name. Users live
// under ou=people, outside the site; passwords never leave the directory.
type User struct {
	UID  string `json:"uid"`
	Name string `json:"name"`
}
