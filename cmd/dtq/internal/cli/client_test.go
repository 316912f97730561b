package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

func TestCredentials(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	id := b.submit(t, dtq.Submission{Type: "echo"})

	// DTQ_API_KEY configures servers; the CLI never sends it.
	code, stdout, stderr := b.runWith(t, map[string]string{"DTQ_TOKEN": "", "DTQ_API_KEY": adminToken}, "tasks", "get", id)
	requireAPIError(t, code, stdout, stderr, "UNAUTHORIZED")

	code, stdout, stderr = b.runWith(t, map[string]string{"DTQ_TOKEN": "wrong"}, "tasks", "get", id)
	requireAPIError(t, code, stdout, stderr, "UNAUTHORIZED")

	// A reader may read but not act.
	reader := map[string]string{"DTQ_TOKEN": readerToken}
	code, _, stderr = b.runWith(t, reader, "tasks", "get", id)
	require.Equal(t, 0, code, stderr)
	for _, args := range [][]string{
		{"tasks", "cancel", id},
		{"queues", "pause", "default"},
		{"dlq", "purge", "--yes"},
		{"tasks", "submit", "echo"},
	} {
		code, stdout, stderr = b.runWith(t, reader, args...)
		requireAPIError(t, code, stdout, stderr, "FORBIDDEN")
	}
	code, _, stderr = b.runWith(t, map[string]string{"DTQ_TOKEN": producerToken}, "tasks", "submit", "echo")
	require.Equal(t, 0, code, stderr)

	// --token wins over DTQ_TOKEN, --api-url over DTQ_API_URL.
	code, _, stderr = b.runWith(t, reader, "queues", "pause", "default", "--token", adminToken)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = b.runWith(t, map[string]string{"DTQ_API_URL": "http://127.0.0.1:1"}, "tasks", "get", id, "--api-url", b.srv.URL)
	require.Equal(t, 0, code, stderr)
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	for _, vars := range []map[string]string{{"DTQ_API_URL": "http://127.0.0.1:1"}, {"DTQ_API_URL": "http://127.0.0.1:1/"}} {
		code, stdout, stderr := runCmd(t, vars, "queues", "list")
		require.Equal(t, 1, code)
		require.Empty(t, stdout)
		require.Equal(t, `dtq: cannot reach the dtq API at http://127.0.0.1:1 (--api-url or DTQ_API_URL): connection refused; `+
			`start it with "dtq api" (or "dtq dev" for local use), or point --api-url at it`+"\n", stderr)
	}
}

// TestRequestShape checks what goes over the wire: the path under a base
// URL with a path prefix, the bearer token, JSON bodies with their content
// type, and a body only when there is something to send.
func TestRequestShape(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, query, auth, contentType, body string
	}
	var (
		mu   sync.Mutex
		reqs []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs = append(reqs, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"),
			r.Header.Get("Content-Type"), string(body)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/cancel"):
			_, _ = w.Write([]byte(`{"task": {"task_id": "abc", "status": "cancelled"}, "cancel_requested": false}`))
		case strings.HasSuffix(r.URL.Path, "/pause"):
			_, _ = w.Write([]byte(`{"queue": "q", "paused": true, "changed": true}`))
		default:
			_, _ = w.Write([]byte(`{"task_id": "abc", "status": "queued", "duplicate": false}`))
		}
	}))
	defer srv.Close()
	vars := map[string]string{"DTQ_API_URL": srv.URL + "/dtq/", "DTQ_TOKEN": "s3cret"}

	code, _, stderr := runCmd(t, vars, "tasks", "submit", "echo", "--payload", `{"b": 1, "a": [1, 2]}`, "--priority", "0", "--delay", "1.5")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runCmd(t, vars, "tasks", "cancel", "a/b", "--reason", "why not")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runCmd(t, vars, "queues", "pause", "q")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = runCmd(t, vars, "tasks", "get", "abc", "--wait", "2s")
	require.Equal(t, 0, code, stderr)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reqs, 4)
	var submitted map[string]any
	require.NoError(t, json.Unmarshal([]byte(reqs[0].body), &submitted))
	require.Equal(t, map[string]any{"task_type": "echo", "payload": map[string]any{"b": 1.0, "a": []any{1.0, 2.0}},
		"priority": 0.0, "delay_ms": 1500.0}, submitted)
	require.Equal(t, seen{"POST", "/dtq/api/v1/tasks", "", "Bearer s3cret", "application/json", reqs[0].body}, reqs[0])
	require.Equal(t, seen{"POST", "/dtq/api/v1/tasks/a%2Fb/cancel", "", "Bearer s3cret", "application/json", `{"reason":"why not"}`}, reqs[1])
	require.Equal(t, seen{"POST", "/dtq/api/v1/queues/q/pause", "", "Bearer s3cret", "", ""}, reqs[2])
	require.Equal(t, seen{"GET", "/dtq/api/v1/tasks/abc", "wait=2s", "Bearer s3cret", "", ""}, reqs[3])
}

// TestAPIErrorNamesIDs: an error whose details name a task or workflow the
// message does not mention ends with it.
func TestAPIErrorNamesIDs(t *testing.T) {
	t.Parallel()
	const id = "01a22abc79737000bdf8f3d1a3010001"
	for _, tt := range []struct {
		name string
		err  apiError
		want string
	}{
		{"in progress", apiError{Code: "IDEMPOTENCY_IN_PROGRESS", Message: "still in progress", Details: map[string]any{"task_id": id}, RequestID: "r1"},
			"IDEMPOTENCY_IN_PROGRESS: still in progress (task " + id + ") (request r1)"},
		{"a workflow", apiError{Code: "IDEMPOTENCY_IN_PROGRESS", Message: "still in progress", Details: map[string]any{"workflow_id": id}},
			"IDEMPOTENCY_IN_PROGRESS: still in progress (workflow " + id + ")"},
		{"named already", apiError{Code: "TASK_TERMINAL", Message: "task " + id + " is succeeded", Details: map[string]any{"task_id": id, "status": "succeeded"}},
			"TASK_TERMINAL: task " + id + " is succeeded"},
		{"no ids", apiError{Code: "QUEUE_FULL", Message: "full", Details: map[string]any{"queue": "q"}, RequestID: "r2"},
			"QUEUE_FULL: full (request r2)"},
		{"not a string", apiError{Code: "X", Message: "m", Details: map[string]any{"task_id": 7.0}}, "X: m"},
	} {
		require.Equal(t, tt.want, tt.err.Error(), tt.name)
	}
}

func TestErrorThatIsNotTheAPIs(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-ID", "proxy-1")
		http.Error(w, "<html>upstream\nunavailable</html>", http.StatusBadGateway)
	}))
	defer srv.Close()
	code, stdout, stderr := runCmd(t, map[string]string{"DTQ_API_URL": srv.URL}, "workers", "list")
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, "dtq: HTTP 502 Bad Gateway from GET "+srv.URL+"/api/v1/workers: <html>upstream; unavailable</html> (request proxy-1)\n", stderr)
}

func TestOperatorCompletion(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	b.submit(t, dtq.Submission{Queue: "emails", Type: "echo"})
	b.submit(t, dtq.Submission{Queue: "images", Type: "echo"})
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"tasks", "list", "--status", ""}, statusNames()},
		{[]string{"tasks", "list", "-o", ""}, []string{"table", "json"}},
		{[]string{"dlq", "list", "--output", ""}, []string{"table", "json"}},
		{[]string{"queues", "stats", ""}, []string{"emails", "images"}},
		{[]string{"queues", "pause", "emails", ""}, nil},
		{[]string{"events", "tail", "--type", "TASK_DEAD"}, []string{"TASK_DEAD_LETTERED"}},
	}
	for _, tt := range tests {
		code, stdout, stderr := b.run(t, append([]string{"__complete"}, tt.args...)...)
		require.Equal(t, 0, code, stderr)
		got := lines(stdout)
		require.Regexp(t, `^:\d+$`, got[len(got)-1], "the directive ends the answer")
		got = got[:len(got)-1]
		var names []string
		for _, g := range got {
			if g != "" {
				names = append(names, strings.SplitN(g, "\t", 2)[0])
			}
		}
		if tt.want == nil {
			require.Empty(t, names, "%v", tt.args)
		} else {
			for _, w := range tt.want {
				require.Contains(t, names, w, "%v", tt.args)
			}
		}
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers
	}))
	defer srv.Close()
	for _, args := range [][]string{{"queues", "list"}, {"events", "tail"}} {
		code, stdout, stderr := runCmd(t, map[string]string{"DTQ_API_URL": srv.URL}, append(args, "--timeout", "200ms")...)
		require.Equal(t, 1, code)
		require.Empty(t, stdout)
		require.Equal(t, "dtq: the dtq API at "+srv.URL+" did not answer within 200ms (--timeout)\n", stderr)
	}
}
