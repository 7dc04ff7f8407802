package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Download streams the file at path (e.g. /images/desk/2/root.squashfs) into w and
// returns how many bytes it wrote. There is no overall time limit (a multi-GB image
// takes minutes over a WAN); ctx ends it. Nothing is buffered in memory.
func (c *Client) Download(ctx context.Context, path string, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(c.BaseURL, "/")+path, nil)
	if err != nil {
		return 0, err
	}
	switch {
	case c.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.Token)
	case c.User != "":
		req.SetBasicAuth(c.User, c.Password)
	}
	hc := http.DefaultClient
	if c.HTTP != nil {
		hc = &http.Client{Transport: c.HTTP.Transport}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("cannot reach the site manager at %s: %w", c.BaseURL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, &APIError{Status: resp.StatusCode, Msg: fmt.Sprintf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))}
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("GET %s: %d of %d bytes", path, n, resp.ContentLength)
	}
	return n, err
}
