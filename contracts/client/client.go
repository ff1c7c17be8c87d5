// Package client is the Go client of ax's HTTP API; the ax CLI uses it.
// Every non-2xx answer is returned as a *contracts.Problem.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/contracts"
)

// Client talks to one ax submitter.
type Client struct {
	base  string
	http  *http.Client
	token string
}

// Option changes how a Client is built.
type Option func(*Client)

// WithHTTPClient sends requests through hc instead of a default client with
// a 30 s timeout. A producer that keeps many requests in flight (a load
// generator, a bulk importer) needs a transport that keeps as many idle
// connections per host, or every request beyond the default two opens a
// new connection.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = hc }
}

// WithToken sends token, an API key's token, as a bearer token with every
// request. Read it from a file or the environment: a token given on a
// command line shows in process listings.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// New returns a client for baseURL ("http://127.0.0.1:8080"); a bare
// host:port gets "http://".
func New(baseURL string, opts ...Option) *Client {
	if !strings.Contains(baseURL, "://") {
		baseURL = "http://" + baseURL
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), http: &http.Client{Timeout: 30 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Submit creates a task; Task.Deduplicated tells whether an existing task
// with the same business key was returned instead.
func (c *Client) Submit(ctx context.Context, req contracts.SubmitRequest) (*contracts.Task, error) {
	var out contracts.Task
	return &out, c.do(ctx, http.MethodPost, "/v1/tasks", req, &out)
}

// Get loads a task.
func (c *Client) Get(ctx context.Context, id string) (*contracts.Task, error) {
	var out contracts.Task
	return &out, c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id), nil, &out)
}

// History loads a task's transfers, oldest first.
func (c *Client) History(ctx context.Context, id string) (*contracts.History, error) {
	var out contracts.History
	return &out, c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/history", nil, &out)
}

// Cancel cancels a task that has not finished.
func (c *Client) Cancel(ctx context.Context, id string) (*contracts.Task, error) {
	return c.CancelWithNote(ctx, id, "")
}

// CancelWithNote is Cancel recording note (who asks) beside the API key,
// which is the actor of record.
func (c *Client) CancelWithNote(ctx context.Context, id, note string) (*contracts.Task, error) {
	var out contracts.Task
	path := "/v1/tasks/" + url.PathEscape(id) + "/cancel"
	if note != "" {
		path += "?actor=" + url.QueryEscape(note)
	}
	return &out, c.do(ctx, http.MethodPost, path, nil, &out)
}

// getPage GETs path with the query q and limit (0: the server's default)
// into out: every list call's request.
func (c *Client) getPage(ctx context.Context, path string, q url.Values, limit int, out any) error {
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.do(ctx, http.MethodGet, path, nil, out)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	// The server refuses a state-changing request without this header, body
	// or not: it keeps such requests out of reach of a cross-site HTML form
	// (see docs/api.md).
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		p := &contracts.Problem{}
		if json.Unmarshal(data, p) != nil || p.Code == "" {
			p = &contracts.Problem{Status: resp.StatusCode, Code: contracts.CodeInternal,
				Title: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(data))}
		}
		return p
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decode response: %w", method, path, err)
	}
	return nil
}
