package api_test

import (
	"net/http"
	"testing"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/sitemgmt/api"
	"github.com/overtime-hpc/overtime/vocab/client"
	"github.com/overtime-hpc/overtime/vocab/model"
)

// runUserSuite: listing, password changes and deletion of directory users. It works on a
// user of its own, so that the example users keep their passwords for the other suites.
func runUserSuite(t *testing.T, env *testenv.Env) {
	admin := env.Admin()
	if err := admin.Send(http.MethodPost, "/api/v1/users", nil, api.UserRequest{UID: "grace", Name: "Grace H.", Password: "grace-secret"}, nil); err != nil {
		t.Fatal(err)
	}
	grace := env.Client("grace", "grace-secret")
	dave := env.Client("dave", "dave-secret") // a viewer

	var users []model.User
	if _, err := admin.Get("/api/v1/users", nil, &users); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, u := range users {
		found = found || u == model.User{UID: "grace", Name: "Grace H."}
	}
	if !found {
		t.Errorf("user list lacks grace: %+v", users)
	}

	for _, tc := range []struct {
		name string
		do   func() error
		want int
	}{
		{"viewer lists users", func() error { _, err := dave.Get("/api/v1/users", nil, nil); return err }, 403},
		{"viewer deletes a user", func() error { return dave.Send(http.MethodDelete, "/api/v1/users/grace", nil, nil, nil) }, 403},
		{"user sets another's password", func() error {
			return grace.Send(http.MethodPut, "/api/v1/users/dave/password", nil, api.PasswordRequest{OldPassword: "grace-secret", Password: "taken-over"}, nil)
		}, 403},
		{"own password without the old one", func() error {
			return grace.Send(http.MethodPut, "/api/v1/users/grace/password", nil, api.PasswordRequest{Password: "grace-new-secret"}, nil)
		}, 400},
		{"own password with a wrong old one", func() error {
			return grace.Send(http.MethodPut, "/api/v1/users/grace/password", nil, api.PasswordRequest{OldPassword: "wrong-one", Password: "grace-new-secret"}, nil)
		}, 403},
		{"too short", func() error {
			return grace.Send(http.MethodPut, "/api/v1/users/grace/password", nil, api.PasswordRequest{OldPassword: "grace-secret", Password: "short"}, nil)
		}, 400},
		{"admin sets an unknown user's password", func() error {
			return admin.Send(http.MethodPut, "/api/v1/users/nobody/password", nil, api.PasswordRequest{Password: "long-enough"}, nil)
		}, 404},
		{"admin deletes an unknown user", func() error { return admin.Send(http.MethodDelete, "/api/v1/users/nobody", nil, nil, nil) }, 404},
		{"admin deletes themselves", func() error { return admin.Send(http.MethodDelete, "/api/v1/users/admin", nil, nil, nil) }, 409},
	} {
		if err := tc.do(); status(err) != tc.want {
			t.Errorf("%s: got %v (status %d), want status %d", tc.name, err, status(err), tc.want)
		}
	}

	// A user changes their own password: the old one stops working at once.
	if err := grace.Send(http.MethodPut, "/api/v1/users/grace/password", nil, api.PasswordRequest{OldPassword: "grace-secret", Password: "grace-new-secret"}, nil); err != nil {
		t.Fatal(err)
	}
	if authenticates(grace) {
		t.Error("the old password still works after the change")
	}
	if !authenticates(env.Client("grace", "grace-new-secret")) {
		t.Error("the new password does not work")
	}
	// A site admin resets it without knowing it, then deletes the user.
	if err := admin.Send(http.MethodPut, "/api/v1/users/grace/password", nil, api.PasswordRequest{Password: "grace-reset-pw"}, nil); err != nil {
		t.Fatal(err)
	}
	if !authenticates(env.Client("grace", "grace-reset-pw")) {
		t.Error("the password set by the admin does not work")
	}
	if err := admin.Send(http.MethodDelete, "/api/v1/users/grace", nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if authenticates(env.Client("grace", "grace-reset-pw")) {
		t.Error("a deleted user still authenticates")
	}
}

// authenticates reports whether the server accepts c's credentials (grace has no role in
// the site, so whoami answers 403 rather than 200 when it does).
func authenticates(c *client.Client) bool {
	_, err := c.Get("/api/v1/whoami", nil, nil)
	return status(err) != 401
}
