package httpapi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The abuse suite sends what a careless or hostile client might: slow and
// partial requests, malformed and oversized headers, oversized, malformed,
// deeply nested and non-UTF-8 bodies on every route that takes one, huge
// query strings. Each gets its documented 4xx, never a 500, and nothing is
// written to Redis.

// abuseLimits are short server limits, so that slow clients are cut off in
// a test's time.
var abuseLimits = ServerLimits{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 600 * time.Millisecond,
	MaxHeaderBytes: 64 << 10}

// abuseServer serves b's API through the http.Server NewHTTPServer builds,
// with abuseLimits.
func abuseServer(t *testing.T, b *bundle) *httptest.Server {
	t.Helper()
	h := checkAnswers(t, b.api)
	srv := httptest.NewUnstartedServer(h)
	srv.Config = NewHTTPServer(h, abuseLimits)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// rawExchange writes req on a new connection (with write closed after it
// when closeWrite is set) and reads one response.
func rawExchange(t *testing.T, addr, req string, closeWrite bool) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, req)
	require.NoError(t, err)
	if closeWrite {
		require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "no answer to %.80q", req)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	res.Body.Close()
	res.Body = io.NopCloser(strings.NewReader(string(body)))
	return res
}

// requireNothingWritten checks that no key exists under the test's prefix
// and that nothing was logged as an unexpected error.
func requireNothingWritten(t *testing.T, b *bundle) {
	t.Helper()
	require.Zero(t, b.keyCount(t), "a refused request wrote to Redis")
	require.NotContains(t, b.logs.String(), `"level":"ERROR"`)
}

// requireAPIAnswer checks status and, when code is not "", the API's error
// envelope with that code (answers of Go's own server are plain text).
func requireAPIAnswer(t *testing.T, res *http.Response, status int, code string) {
	t.Helper()
	body, _ := io.ReadAll(res.Body)
	require.Equal(t, status, res.StatusCode, "%s", body)
	if code != "" {
		(&response{status: res.StatusCode, header: res.Header, body: body}).requireError(t, status, code, "")
	}
}

func TestAbuseMalformedRequests(t *testing.T) {
	t.Parallel()
	const host = "Host: localhost\r\n"
	submit := func(hdr, body string) string {
		return "POST /api/v1/tasks HTTP/1.1\r\n" + host + "Content-Type: application/json\r\n" + hdr +
			fmt.Sprintf("Content-Length: %d\r\nConnection: close\r\n\r\n", len(body)) + body
	}
	get := func(target, hdr string) string {
		return "GET " + target + " HTTP/1.1\r\n" + host + hdr + "Connection: close\r\n\r\n"
	}
	manyParams := make([]string, 3000)
	for i := range manyParams {
		manyParams[i] = fmt.Sprintf("p%d=1", i)
	}
	tests := []struct {
		name       string
		req        string
		closeWrite bool // the client stops sending after req
		status     int
		code       string // "" = an answer of Go's server, before the API
	}{
		{"header line without colon", get("/api/v1/queues", "Not a header\r\n"), false, http.StatusBadRequest, ""},
		{"space in header name", get("/api/v1/queues", "Bad Name: x\r\n"), false, http.StatusBadRequest, ""},
		{"control character in header value", get("/api/v1/queues", "X-Thing: a\x01b\r\n"), false, http.StatusBadRequest, ""},
		{"no Host", "GET /api/v1/queues HTTP/1.1\r\nConnection: close\r\n\r\n", false, http.StatusBadRequest, ""},
		{"headers over MaxHeaderBytes", get("/api/v1/queues", "X-Big: "+strings.Repeat("a", 80<<10)+"\r\n"), false, http.StatusRequestHeaderFieldsTooLarge, ""},
		{"query over MaxHeaderBytes", get("/api/v1/tasks?queue="+strings.Repeat("a", 80<<10), ""), false, http.StatusRequestHeaderFieldsTooLarge, ""},
		{"huge query value", get("/api/v1/tasks?queue="+strings.Repeat("a", 40<<10), ""), false, http.StatusBadRequest, codeInvalidRequest},
		{"thousands of query parameters", get("/api/v1/tasks?"+strings.Join(manyParams, "&"), ""), false, http.StatusBadRequest, codeInvalidRequest},
		{"repeated query parameter", get("/api/v1/tasks?limit=1&limit=2", ""), false, http.StatusBadRequest, codeInvalidRequest},
		{"bad percent escape in query", get("/api/v1/tasks?queue=%zz", ""), false, http.StatusBadRequest, codeInvalidRequest},
		{"invalid UTF-8 in query", get("/api/v1/tasks?queue=%ff%fe", ""), false, http.StatusBadRequest, codeInvalidRequest},
		{"invalid UTF-8 in path", "POST /api/v1/queues/%ff/pause HTTP/1.1\r\n" + host + "Content-Length: 0\r\nConnection: close\r\n\r\n", false, http.StatusBadRequest, codeInvalidRequest},
		{"huge Idempotency-Key", submit("Idempotency-Key: "+strings.Repeat("k", 10<<10)+"\r\n", `{"task_type":"echo"}`), false, http.StatusBadRequest, codeInvalidTask},
		{"control character in Idempotency-Key", submit("Idempotency-Key: a\tb\r\n", `{"task_type":"echo"}`), false, http.StatusBadRequest, codeInvalidTask},
		{"Content-Length not a number", "POST /api/v1/tasks HTTP/1.1\r\n" + host + "Content-Type: application/json\r\nContent-Length: ten\r\n\r\n", false, http.StatusBadRequest, ""},
		{"two Content-Lengths", "POST /api/v1/tasks HTTP/1.1\r\n" + host + "Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", false, http.StatusBadRequest, ""},
		{"bad chunked encoding", "POST /api/v1/tasks HTTP/1.1\r\n" + host + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", false, http.StatusBadRequest, codeInvalidRequest},
		{"body shorter than Content-Length", "POST /api/v1/tasks HTTP/1.1\r\n" + host + "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"task_type\":", true, http.StatusBadRequest, codeInvalidRequest},
		{"body cut off mid-chunk", "POST /api/v1/tasks HTTP/1.1\r\n" + host + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{\"task_type\":", true, http.StatusBadRequest, codeInvalidRequest},
		{"body not JSON content type", "POST /api/v1/tasks HTTP/1.1\r\n" + host + "Content-Type: text/plain\r\nContent-Length: 20\r\nConnection: close\r\n\r\n{\"task_type\":\"echo\"}", false, http.StatusUnsupportedMediaType, codeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			srv := abuseServer(t, b)
			res := rawExchange(t, srv.Listener.Addr().String(), tt.req, tt.closeWrite)
			requireAPIAnswer(t, res, tt.status, tt.code)
			requireNothingWritten(t, b)
		})
	}
}

// bodyRoute is a route that reads a body, with its path parameters filled
// in and the size its body may have.
type bodyRoute struct {
	method, path string
	limit        int
}

// bodyRoutes lists every route but the GETs.
func bodyRoutes(s *Server) []bodyRoute {
	var out []bodyRoute
	fill := strings.NewReplacer("{id}", "01a2312a0000700000000000000a0001", "{task_id}", "01a2312a0000700000000000000a0001",
		"{queue}", "abuse", "{name}", "abuse")
	for _, rt := range s.routes {
		if rt.method == http.MethodGet {
			continue
		}
		limit := maxActionBody
		switch rt.pattern {
		case "/api/v1/tasks", "/api/v1/schedules/{name}", "/api/v1/tasks/{id}/complete": // they carry a payload or a result
			limit = int(s.maxBody)
		case "/api/v1/tasks/batch":
			limit = maxBatchBodyBytes
		case "/api/v1/workflows", "/api/v1/tasks/{id}/nodes":
			limit = maxWorkflowBodyBytes
		case "/api/v1/tasks/{id}/progress", "/api/v1/tasks/{id}/heartbeat": // they carry log lines
			limit = maxProgressBody
		}
		out = append(out, bodyRoute{rt.method, fill.Replace(rt.pattern), limit})
	}
	return out
}

func TestAbuseBodies(t *testing.T) {
	t.Parallel()
	probe := setup(t, options{})
	routes := bodyRoutes(probe.api)
	require.GreaterOrEqual(t, len(routes), 14, "every POST, PUT and DELETE route")

	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	bodies := []struct {
		name    string
		body    func(limit int) string
		chunked bool // sent without Content-Length
		status  int
		code    string
	}{
		{"oversized, declared length", func(l int) string { return `{"x":"` + strings.Repeat("a", l) + `"}` }, false, http.StatusRequestEntityTooLarge, codePayloadTooLarge},
		{"oversized, chunked", func(l int) string { return `{"x":"` + strings.Repeat("a", l) + `"}` }, true, http.StatusRequestEntityTooLarge, codePayloadTooLarge},
		{"malformed JSON", func(int) string { return `{"task_type": "echo",` }, false, http.StatusBadRequest, codeInvalidRequest},
		{"not an object", func(int) string { return `["echo"]` }, false, http.StatusBadRequest, codeInvalidRequest},
		{"trailing data", func(int) string { return `{} {}` }, false, http.StatusBadRequest, codeInvalidRequest},
		{"deep nesting", func(int) string { return `{"task_type":"echo","tasks":` + deep(20000) + `}` }, false, http.StatusBadRequest, ""},
		{"invalid UTF-8", func(int) string { return "{\"task_type\":\"echo\",\"payload\":{\"a\":\"\xff\xfe\"}}" }, false, http.StatusBadRequest, codeInvalidRequest},
		{"NUL bytes", func(int) string { return "{\x00}" }, false, http.StatusBadRequest, codeInvalidRequest},
	}
	for _, rt := range routes {
		for _, bd := range bodies {
			t.Run(rt.method+" "+rt.path+"/"+bd.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, options{})
				body := bd.body(rt.limit)
				req, err := http.NewRequestWithContext(b.ctx, rt.method, b.srv.URL+rt.path, strings.NewReader(body))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				if bd.chunked {
					req.ContentLength = -1
					req.Body = io.NopCloser(strings.NewReader(body)) // hides the length
				}
				res, err := b.srv.Client().Do(req)
				require.NoError(t, err)
				defer res.Body.Close()
				data, err := io.ReadAll(res.Body)
				require.NoError(t, err)
				r := &response{status: res.StatusCode, header: res.Header, body: data}
				require.Equal(t, bd.status, r.status, "%s", data)
				e := r.errBody(t)
				if bd.code != "" {
					require.Equal(t, bd.code, e.Code, "%s", data)
				} else {
					require.Contains(t, []string{codeInvalidRequest, codeInvalidTask}, e.Code, "%s", data)
				}
				requireNothingWritten(t, b)
			})
		}
	}
}

// TestAbuseSlowClients checks the server's timeouts as NewHTTPServer sets
// them: a client trickling its headers (slowloris) is cut off (closed, or
// a plain 400 from Go's server) after ReadHeaderTimeout, one trickling its
// body gets the API's 400 after ReadTimeout, and neither reaches Redis.
func TestAbuseSlowClients(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prefix  string // sent at once
		trickle string // then one byte per tick
		// mayClose: the server may close the connection instead of
		// answering 400.
		mayClose bool
	}{
		{"headers one byte at a time", "", "POST /api/v1/tasks HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-Padding: " + strings.Repeat("p", 200) + "\r\n\r\n", true},
		{"body one byte at a time", "POST /api/v1/tasks HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 300\r\n\r\n", `{"task_type":"echo","payload":{"a":"` + strings.Repeat("x", 300), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			srv := abuseServer(t, b)
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			require.NoError(t, err)
			defer conn.Close()
			start := time.Now()
			_, err = io.WriteString(conn, tt.prefix)
			require.NoError(t, err)

			// Trickle in the background; the reader below sees what the
			// server does. All of it would take 20 ms × len > 4 s.
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for i := range len(tt.trickle) {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := conn.Write([]byte{tt.trickle[i]}); err != nil {
						return
					}
				}
			}()
			defer func() { close(stop); <-done }()

			require.NoError(t, conn.SetReadDeadline(time.Now().Add(3*time.Second)))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			elapsed := time.Since(start)
			require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the server kept the slow connection open")
			require.False(t, err != nil && !tt.mayClose, "the server closed instead of answering: %v", err)
			if err == nil {
				// Go's server answers headers it gave up on with a plain 400;
				// the API answers a body it could not read with its own.
				code := ""
				if !tt.mayClose {
					code = codeInvalidRequest
				}
				requireAPIAnswer(t, res, http.StatusBadRequest, code)
				res.Body.Close()
			}
			// Cut off by the timeout, long before the client was done.
			require.Less(t, elapsed, time.Duration(len(tt.trickle))*20*time.Millisecond/2)
			requireNothingWritten(t, b)
		})
	}
}
