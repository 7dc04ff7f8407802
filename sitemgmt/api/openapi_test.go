package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/overtime-hpc/overtime/internal/testenv"
	"github.com/overtime-hpc/overtime/vocab/client"
)

// specChecker validates every request and response a test client exchanges with the
// running server against docs/api/openapi.yaml, and records which operations were used,
// so that the spec and the server cannot drift apart silently.
type specChecker struct {
	t      testing.TB
	doc    *openapi3.T
	router routers.Router
	mu     sync.Mutex
	seen   map[string]bool
}

func newSpecChecker(t testing.TB) *specChecker {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(filepath.Join(testenv.RepoRoot(t), "docs", "api", "openapi.yaml"))
	if err != nil {
		t.Fatalf("load OpenAPI: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("OpenAPI document is invalid: %v", err)
	}
	// Route on paths only: the test server listens on a random port.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &specChecker{t: t, doc: doc, router: router, seen: map[string]bool{}}
}

// wrap checks cl's requests and answers against the spec, sent through the transport
// cl had (a TLS environment's trusts the test's CA).
func (c *specChecker) wrap(cl *client.Client) {
	base := http.DefaultTransport
	if cl.HTTP != nil && cl.HTTP.Transport != nil {
		base = cl.HTTP.Transport
	}
	cl.HTTP = &http.Client{Transport: checkedTransport{c, base}}
}

type checkedTransport struct {
	c    *specChecker
	base http.RoundTripper
}

func (t checkedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.c.roundTrip(t.base, req)
}

func (c *specChecker) roundTrip(base http.RoundTripper, req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	respBody, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(respBody))

	vreq := req.Clone(context.Background())
	vreq.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := c.router.FindRoute(vreq)
	if err != nil {
		c.t.Errorf("OpenAPI: %s %s is not in the spec: %v", req.Method, req.URL.Path, err)
		return resp, nil
	}
	c.mu.Lock()
	c.seen[req.Method+" "+route.Path] = true
	c.mu.Unlock()
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	// Requests the tests send on purpose in a wrong shape (bad input tests) are allowed to
	// violate the request schema; the response must still be described.
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode,
		Header: resp.Header, Body: io.NopCloser(bytes.NewReader(respBody)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		c.t.Errorf("OpenAPI: response to %s %s (status %d) does not match the spec: %v\nbody: %s", req.Method, req.URL.Path, resp.StatusCode, err, respBody)
	}
	if reqErr != nil && resp.StatusCode < 400 {
		c.t.Errorf("OpenAPI: request %s %s violates the spec but the server accepted it: %v", req.Method, req.URL.Path, reqErr)
	}
	return resp, nil
}

// unused lists the spec's operations no request reached.
func (c *specChecker) unused() []string {
	var missing []string
	for path, item := range c.doc.Paths.Map() {
		for method := range item.Operations() {
			if !c.seen[method+" "+path] {
				missing = append(missing, fmt.Sprintf("%s %s", method, path))
			}
		}
	}
	sort.Strings(missing)
	return missing
}

// TestOpenAPICoverage runs the whole API suite through the spec checker and then demands
// that every documented operation was exercised at least once.
func TestOpenAPICoverage(t *testing.T) {
	chk := newSpecChecker(t)
	env := testenv.New(t, testenv.Options{Wrap: chk.wrap})
	env.ApplyExample(t)
	runAPISuite(t, env)
	runSeatSuite(t, testenv.Options{Wrap: chk.wrap})
	runHomesSuite(t, testenv.Options{Wrap: chk.wrap})
	if missing := chk.unused(); len(missing) > 0 {
		t.Errorf("operations in docs/api/openapi.yaml that no test exercised: %s", strings.Join(missing, ", "))
	}
}
