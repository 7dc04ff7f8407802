package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/overtime-hpc/overtime/vocab/wire"
)

// UploadImageFile streams r as the artefact name of a new version of image: PUT
// /api/v1/images/{image}/versions/{version}/files/{name}. size is r's length (-1: unknown,
// sent chunked; the server then cuts it off at its limit). The request asks for "100
// continue", so a refusal (no right to the image, too large, the version already
// published) comes before the body is sent. Nothing is buffered: r is read once, in
// chunks, and hashed on the way; the answer's sha256 and size are checked against what
// was sent. Wrap r in a ProgressReader to show progress. Publish the version with
// PublishImageVersion once every file is up, or DiscardUpload.
func (c *Client) UploadImageFile(ctx context.Context, image, version, name string, r io.Reader, size int64) (*wire.UploadedFile, error) {
	h := sha256.New()
	body := &hashReader{r: r, h: h}
	path := "/api/v1/images/" + url.PathEscape(image) + "/versions/" + url.PathEscape(version) + "/files/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	if size == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Expect", "100-continue")
	c.auth(req)
	resp, err := c.streamClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("uploading %s to the site manager at %s: %w", name, c.BaseURL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, apiError(http.MethodPut, path, resp, data)
	}
	var out wire.UploadedFile
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("upload of %s: answer: %w", name, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if out.SHA256 != sum || out.Size != body.n {
		return nil, fmt.Errorf("upload of %s: the site manager stored %d bytes with sha256 %s, %d bytes with sha256 %s were sent", name, out.Size, out.SHA256, body.n, sum)
	}
	return &out, nil
}

// PublishImageVersion publishes what was uploaded for a version: the site manager writes
// its SHA256SUMS and registers it (immutable from then on). files, when given, must be
// exactly what was uploaded; root names the file whose sha256 and size the version
// records (default: root.squashfs, else disk.qcow2, else the only file).
func (c *Client) PublishImageVersion(ctx context.Context, image, version string, files []string, root string, dryRun bool) (*Changes, error) {
	var out Changes
	path := "/api/v1/images/" + url.PathEscape(image) + "/versions/" + url.PathEscape(version) + "/publish"
	if dryRun {
		path += "?dryRun=true"
	}
	if err := c.sendCtx(ctx, http.MethodPost, path, wire.PublishRequest{Files: files, Root: root}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DiscardUpload removes what was uploaded for a version that is not published.
func (c *Client) DiscardUpload(ctx context.Context, image, version string) error {
	path := "/api/v1/images/" + url.PathEscape(image) + "/versions/" + url.PathEscape(version) + "/upload"
	return c.sendCtx(ctx, http.MethodDelete, path, nil, nil)
}

// ProgressReader calls Report with the bytes read so far, at most every Every (default
// one second) and once at the end of the stream.
type ProgressReader struct {
	R      io.Reader
	Report func(read int64)
	Every  time.Duration
	n      int64
	last   time.Time
}

func (p *ProgressReader) Read(b []byte) (int, error) {
	n, err := p.R.Read(b)
	p.n += int64(n)
	every := p.Every
	if every == 0 {
		every = time.Second
	}
	if p.Report != nil && (err == io.EOF || time.Since(p.last) >= every) {
		p.last = time.Now()
		p.Report(p.n)
	}
	return n, err
}

type hashReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (r *hashReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.h.Write(b[:n])
	r.n += int64(n)
	return n, err
}

// streamClient is the HTTP client for uploads: the caller's transport, without an
// overall timeout (a 64 GiB upload takes long; ctx bounds it), waiting up to 10 s for
// the server's "100 continue" before sending a body.
func (c *Client) streamClient() *http.Client {
	if c.HTTP != nil && c.HTTP.Transport != nil {
		return &http.Client{Transport: c.HTTP.Transport}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ExpectContinueTimeout = 10 * time.Second
	return &http.Client{Transport: t}
}

func (c *Client) auth(req *http.Request) {
	switch {
	case c.Token != "":
		req.Header.Set("Authorization", "Bearer "+c.Token)
	case c.User != "":
		req.SetBasicAuth(c.User, c.Password)
	}
}

func apiError(method, path string, resp *http.Response, data []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return &APIError{Status: resp.StatusCode, Msg: e.Error}
	}
	return &APIError{Status: resp.StatusCode, Msg: method + " " + path + ": " + resp.Status + " " + strconv.Quote(strings.TrimSpace(string(data)))}
}
