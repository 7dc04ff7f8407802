// Package client is the CLI's HTTP client for the site manager's REST API. The CLI never
// writes LDAP itself: every change goes through the server, which authenticates,
// authorises and validates it in one place.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to `overtime serve`. It authenticates as a directory user (User and
// Password, HTTP Basic) or, for a node agent, with its host's bearer token (Token; see
// NewWithToken).
type Client struct {
	BaseURL  string
	User     string
	Password string
	Token    string // host credential: sent as "Authorization: Bearer <Token>" (User is then ignored)
	HTTP     *http.Client
	// What the agent's PC booted (kernel command line), sent with AgentConfig.
	BootedMode string
	BootedExam bool
}

// NewWithToken is a client for a node agent: it authenticates with the host's bearer
// token (`overtime host credential HOST --out FILE` issues it; CredentialFromFile reads it, NewForAgent makes the client).
func NewWithToken(baseURL, token string) *Client {
	return &Client{BaseURL: baseURL, Token: token}
}

// APIError is an error answer from the server; its message is the server's one line.
type APIError struct {
	Status int
	Msg    string
}

func (e *APIError) Error() string { return e.Msg }

// HTTPStatus is the response's status code (for callers that must not import this
// package's types, such as the node agent).
func (e *APIError) HTTPStatus() int { return e.Status }

func (c *Client) do(method, path string, query url.Values, contentType string, body io.Reader) ([]byte, error) {
	return c.doCtx(context.Background(), method, path, query, contentType, body)
}

func (c *Client) doCtx(ctx context.Context, method, path string, query url.Values, contentType string, body io.Reader) ([]byte, error) {
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	switch {
	case c.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.Token)
	case c.User != "":
		req.SetBasicAuth(c.User, c.Password)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the site manager at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return nil, &APIError{Status: resp.StatusCode, Msg: e.Error}
		}
		return nil, &APIError{Status: resp.StatusCode, Msg: fmt.Sprintf("%s %s: %s", method, path, resp.Status)}
	}
	return data, nil
}

// Get decodes a JSON answer into out (or returns the raw body when out is nil).
func (c *Client) Get(path string, query url.Values, out any) ([]byte, error) {
	data, err := c.do(http.MethodGet, path, query, "", nil)
	if err != nil || out == nil {
		return data, err
	}
	return data, json.Unmarshal(data, out)
}

// Send sends in as JSON with the given method and decodes the answer into out.
func (c *Client) Send(method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	data, err := c.do(method, path, query, "application/json", body)
	if err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// SendRaw sends a body of the given content type (CSV import).
func (c *Client) SendRaw(method, path string, query url.Values, contentType string, body io.Reader, out any) error {
	data, err := c.do(method, path, query, contentType, body)
	if err != nil {
		return err
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// Changes is the answer of every write.
type Changes struct {
	DryRun  bool     `json:"dryRun"`
	Changes []string `json:"changes"`
}
