package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/overtime-hpc/overtime/vocab/model"
)

// Directory users (site admins; SetPassword also for the user's own password).

// Users lists the directory users, sorted by uid.
func (c *Client) Users(ctx context.Context) ([]model.User, error) {
	data, err := c.doCtx(ctx, http.MethodGet, "/api/v1/users", nil, "", nil)
	if err != nil {
		return nil, err
	}
	var users []model.User
	return users, json.Unmarshal(data, &users)
}

// PutUser creates a user or sets their display name and password.
func (c *Client) PutUser(ctx context.Context, uid, name, password string) error {
	return c.sendCtx(ctx, http.MethodPost, "/api/v1/users", struct {
		UID      string `json:"uid"`
		Name     string `json:"name,omitempty"`
		Password string `json:"password"`
	}{uid, name, password}, nil)
}

// DeleteUser removes a user from the directory.
func (c *Client) DeleteUser(ctx context.Context, uid string) error {
	_, err := c.doCtx(ctx, http.MethodDelete, "/api/v1/users/"+url.PathEscape(uid), nil, "", nil)
	return err
}

// SetPassword sets uid's password. oldPassword is required when a user who is not a site
// admin changes their own.
func (c *Client) SetPassword(ctx context.Context, uid, oldPassword, password string) error {
	return c.sendCtx(ctx, http.MethodPut, "/api/v1/users/"+url.PathEscape(uid)+"/password", struct {
		OldPassword string `json:"oldPassword,omitempty"`
		Password    string `json:"password"`
	}{oldPassword, password}, nil)
}
