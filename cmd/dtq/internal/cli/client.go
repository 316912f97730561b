package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// apiClient calls the dtq HTTP API for the operator commands. It never talks
// to Redis, so the API's authentication, audit log and validation apply to
// the CLI exactly as to any other client.
type apiClient struct {
	base    string // the API's base URL without a trailing slash
	token   string // sent as "Authorization: Bearer"; "" sends none
	timeout time.Duration
	http    *http.Client
}

// newAPIClient returns a client of the API at base. Call close when done:
// it releases idle connections.
func newAPIClient(base, token string, timeout time.Duration) *apiClient {
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment}
	if dt, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = dt.Clone()
	}
	return &apiClient{base: strings.TrimRight(base, "/"), token: token, timeout: timeout,
		http: &http.Client{Transport: tr}}
}

func (c *apiClient) close() { c.http.CloseIdleConnections() }

// apiError is an error answer of the API: the envelope
// {"code", "message", "details", "request_id"}.
type apiError struct {
	Status    int            `json:"-"`
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details"`
	RequestID string         `json:"request_id"`
}

// Error is the line the CLI prints after "dtq: ". An answer that is not
// the API's envelope has no code: the message says what came back.
func (e *apiError) Error() string {
	if e.Code == "" {
		return e.Message
	}
	msg := e.Code + ": " + e.Message + e.named()
	if e.RequestID == "" {
		return msg
	}
	return fmt.Sprintf("%s (request %s)", msg, e.RequestID)
}

// named ends the message with the task or workflow the details name when
// the message does not: the task an idempotency key is in progress for,
// say, which the caller has no other way to learn.
func (e *apiError) named() string {
	var out strings.Builder
	for _, k := range []struct{ field, noun string }{{"task_id", "task"}, {"workflow_id", "workflow"}} {
		id, _ := e.Details[k.field].(string)
		if id != "" && !strings.Contains(e.Message, id) {
			fmt.Fprintf(&out, " (%s %s)", k.noun, id)
		}
	}
	return out.String()
}

// apiResponse is a successful answer.
type apiResponse struct {
	status int
	header http.Header
	body   []byte
}

// request is one call of the API.
type request struct {
	method string
	path   string     // under the base URL, e.g. "/api/v1/tasks/" + url.PathEscape(id)
	query  url.Values // nil = none
	body   any        // sent as JSON when not nil
	// extra lengthens the timeout, for long-polls that hold the answer.
	extra time.Duration
}

// do sends req and returns a 2xx answer; anything else is an error: an
// *apiError for the API's error envelope, otherwise a message saying what
// went wrong and where.
func (c *apiClient) do(ctx context.Context, req request) (*apiResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout+req.extra)
	defer cancel()
	hr, err := c.newRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	res, err := c.http.Do(hr)
	if err != nil {
		return nil, c.transportError(ctx, err, c.timeout+req.extra)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, c.transportError(ctx, err, c.timeout+req.extra)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return nil, errorAnswer(res, body)
	}
	return &apiResponse{status: res.StatusCode, header: res.Header, body: body}, nil
}

func (c *apiClient) newRequest(ctx context.Context, req request) (*http.Request, error) {
	u := c.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var rd io.Reader
	if req.body != nil {
		b, err := json.Marshal(req.body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("User-Agent", "dtq-cli/"+versionString())
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	return hr, nil
}

// errorAnswer turns a non-2xx answer into an error. A body that is not the
// API's envelope (a proxy's error page, say) is summed up by its status.
func errorAnswer(res *http.Response, body []byte) error {
	var ae apiError
	if json.Unmarshal(body, &ae) == nil && ae.Code != "" {
		ae.Status = res.StatusCode
		return &ae
	}
	msg := fmt.Sprintf("HTTP %s from %s %s", res.Status, res.Request.Method, res.Request.URL.Redacted())
	if s := strings.TrimSpace(string(body)); s != "" {
		msg += ": " + truncate(oneLine(s), 200)
	}
	if id := res.Header.Get("X-Request-ID"); id != "" {
		msg += " (request " + id + ")"
	}
	return &apiError{Status: res.StatusCode, Message: msg}
}

// errInterrupted is returned when the command's context ended (SIGINT)
// during a call.
var errInterrupted = errors.New("interrupted")

// transportError explains a failure to get an answer at all, naming the
// URL and the setting that chose it.
func (c *apiClient) transportError(ctx context.Context, err error, timeout time.Duration) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return fmt.Errorf("the dtq API at %s did not answer within %s (--timeout)", c.base, timeout)
	case ctx.Err() != nil:
		return errInterrupted
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach the dtq API at %s (--api-url or DTQ_API_URL): connection refused; "+
			"start it with \"dtq api\" (or \"dtq dev\" for local use), or point --api-url at it", c.base)
	}
	if dns, ok := errors.AsType[*net.DNSError](err); ok {
		return fmt.Errorf("cannot reach the dtq API at %s (--api-url or DTQ_API_URL): cannot resolve %s", c.base, dns.Name)
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err // the URL is already in the message
	}
	return fmt.Errorf("cannot reach the dtq API at %s (--api-url or DTQ_API_URL): %w", c.base, err)
}

// get decodes a GET answer's JSON into dst and returns the raw body too.
func (c *apiClient) get(ctx context.Context, path string, query url.Values, dst any) ([]byte, error) {
	res, err := c.do(ctx, request{method: http.MethodGet, path: path, query: query})
	if err != nil {
		return nil, err
	}
	return res.body, decodeAnswer(res.body, dst)
}

// post sends body (nil = none) and decodes the answer's JSON into dst (nil
// = ignore).
func (c *apiClient) post(ctx context.Context, path string, body, dst any) (*apiResponse, error) {
	res, err := c.do(ctx, request{method: http.MethodPost, path: path, body: body})
	if err != nil {
		return nil, err
	}
	return res, decodeAnswer(res.body, dst)
}

func decodeAnswer(body []byte, dst any) error {
	if dst == nil {
		return nil
	}
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("the API answered something that is not the expected JSON: %w", err)
	}
	return nil
}

// listAnswer is the shape of every list: {"items": [...], "next_cursor"}.
type listAnswer struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor *string           `json:"next_cursor"`
}

// listPages reads a list from path, following next_cursor when all is set,
// and returns the items and the cursor of the next page ("" = none left).
func (c *apiClient) listPages(ctx context.Context, path string, query url.Values, all bool) ([]json.RawMessage, string, error) {
	items := []json.RawMessage{}
	if query == nil {
		query = url.Values{}
	}
	for {
		var page listAnswer
		if _, err := c.get(ctx, path, query, &page); err != nil {
			return nil, "", err
		}
		items = append(items, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return items, "", nil
		}
		if !all {
			return items, *page.NextCursor, nil
		}
		if query.Get("cursor") == *page.NextCursor {
			return nil, "", errors.New("the API returned the same cursor twice; stopping")
		}
		query.Set("cursor", *page.NextCursor)
	}
}

// pathID escapes one path segment (a task id, queue or worker id).
func pathID(s string) string { return url.PathEscape(s) }
