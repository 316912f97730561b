package httpapi

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRequestIDEchoedWhenSane(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, id := range []string{"abc-123", "req 42 from client", strings.Repeat("x", maxRequestIDLen)} {
		res := b.do(t, http.MethodGet, "/health", "", "X-Request-ID", id)
		require.Equal(t, id, res.header.Get("X-Request-ID"))
	}
	// Inside an error body too.
	res := b.post(t, `{`, "X-Request-ID", "trace-7")
	require.Equal(t, "trace-7", res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "").RequestID)
}

func TestRequestIDGenerated(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	seen := map[string]bool{}
	for _, hdr := range [][]string{
		nil,
		{"X-Request-ID", strings.Repeat("x", maxRequestIDLen+1)},
		{"X-Request-ID", "tab\there"},
		{"X-Request-ID", "naïve"},
	} {
		res := b.do(t, http.MethodGet, "/health", "", hdr...)
		id := res.header.Get("X-Request-ID")
		require.Regexp(t, `^[0-9a-f]{32}$`, id)
		require.False(t, seen[id])
		seen[id] = true
	}
	res := b.do(t, http.MethodGet, "/api/v1/tasks/0190a5c4e2c07000800000000000ffff", "")
	e := res.requireError(t, http.StatusNotFound, codeTaskNotFound, "")
	require.Regexp(t, `^[0-9a-f]{32}$`, e.RequestID)
}

func TestRequestIDInContext(t *testing.T) {
	t.Parallel()
	require.Empty(t, RequestIDFromContext(t.Context()))
	b := setup(t, options{})
	var got string
	b.api.mux.HandleFunc("GET /test/request-id", func(w http.ResponseWriter, r *http.Request) {
		got = RequestIDFromContext(r.Context())
	})
	req := httptest.NewRequest(http.MethodGet, "http://localhost/test/request-id", nil)
	req.Header.Set("X-Request-ID", "ctx-1")
	b.api.ServeHTTP(httptest.NewRecorder(), req)
	require.Equal(t, "ctx-1", got)
}

func TestUnknownPathAndMethod(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	for _, p := range []string{"/api/v1/nope", "/api/v1/tasks/a/b", "/nope", "/"} {
		e := b.do(t, http.MethodGet, p, "").requireError(t, http.StatusNotFound, codeNotFound, "")
		require.NotEmpty(t, e.Message)
	}
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodDelete, "/api/v1/tasks", "GET, HEAD, POST"},
		{http.MethodPut, "/api/v1/tasks/0190a5c4e2c07000800000000000ffff", "DELETE, GET, HEAD"},
		{http.MethodGet, "/api/v1/tasks/0190a5c4e2c07000800000000000ffff/cancel", "POST"},
		{http.MethodPost, "/api/v1/queues/q", "DELETE, GET, HEAD, PUT"},
		{http.MethodGet, "/api/v1/tasks/batch", ""},
		{http.MethodPost, "/health", "GET, HEAD"},
	} {
		res := b.do(t, tc.method, tc.path, "")
		if tc.allow == "" {
			// GET /api/v1/tasks/batch is a task id lookup; auth applies.
			res.requireError(t, http.StatusUnauthorized, codeUnauthorized, "")
			continue
		}
		res.requireError(t, http.StatusMethodNotAllowed, codeInvalidRequest, "")
		require.Equal(t, tc.allow, res.header.Get("Allow"), tc.method+" "+tc.path)
	}
}

func TestPanicRecovery(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.api.mux.HandleFunc("GET /test/panic", func(http.ResponseWriter, *http.Request) {
		panic("internal detail 0xdeadbeef")
	})
	res := b.do(t, http.MethodGet, "/test/panic", "", "X-Request-ID", "boom-1")
	e := res.requireError(t, http.StatusInternalServerError, codeInternal, "")
	require.Equal(t, "boom-1", e.RequestID)
	require.NotContains(t, string(res.body), "deadbeef")
	require.Contains(t, b.logs.String(), "panic serving request")
	require.Contains(t, b.logs.String(), "deadbeef") // the log has it
}

func TestRequestLogLine(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: []APIKey{AdminKey("admin-TOPSECRET")}})
	res := b.post(t, `{"task_type":"echo","payload":{"card":"PAYLOAD-SECRET"}}`,
		"Authorization", "Bearer admin-TOPSECRET", "X-Request-ID", "log-1", "Idempotency-Key", "idem-SECRET")
	require.Equal(t, http.StatusAccepted, res.status)
	b.do(t, http.MethodGet, "/api/v1/tasks/x%0Ay%1B%5B31m", "", "X-Request-ID", "log-2")

	lines := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(b.logs.String()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		if m["msg"] == "http request" {
			lines[m["request_id"].(string)] = m
		}
	}
	require.Len(t, lines, 2)
	l := lines["log-1"]
	require.Equal(t, "POST", l["method"])
	require.Equal(t, "/api/v1/tasks", l["path"])
	require.Equal(t, float64(202), l["status"])
	require.Contains(t, l, "duration")
	require.Equal(t, "admin", l["key"])

	l = lines["log-2"]
	require.Equal(t, "/api/v1/tasks/xy[31m", l["path"]) // control characters stripped
	require.Equal(t, float64(401), l["status"])

	logs := b.logs.String()
	for _, secret := range []string{"TOPSECRET", "PAYLOAD-SECRET", "idem-SECRET"} {
		require.NotContains(t, logs, secret)
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\nb\rc\x00d\x1b", "abcd"},
		{"bad\xffutf8", "badutf8"},
		{"é ok", "é ok"},
		{"\u2028sep\u0085", "\u2028sep"},
		{strings.Repeat("x", maxLogField+10), strings.Repeat("x", maxLogField) + "…"},
	} {
		require.Equal(t, tc.want, clean(tc.in), "%q", tc.in)
	}
}
