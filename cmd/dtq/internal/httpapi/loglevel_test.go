package httpapi

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRequestLevel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, path, client string
		status                     int
		want                       slog.Level
	}{
		{"health", "GET", "/health", "", 200, slog.LevelDebug},
		{"ready", "GET", "/ready", "", 200, slog.LevelDebug},
		{"ready failing", "GET", "/ready", "", 503, slog.LevelWarn},
		{"metrics", "GET", "/metrics", "", 200, slog.LevelDebug},
		{"metrics refused", "GET", "/metrics", "", 401, slog.LevelInfo},
		{"dashboard poll", "GET", "/api/v1/queues", "dashboard", 200, slog.LevelDebug},
		{"dashboard read failing", "GET", "/api/v1/tasks/x", "dashboard", 404, slog.LevelInfo},
		{"dashboard action", "POST", "/api/v1/queues/q/pause", "dashboard", 200, slog.LevelInfo},
		{"other client read", "GET", "/api/v1/queues", "", 200, slog.LevelInfo},
		{"submit", "POST", "/api/v1/tasks", "", 202, slog.LevelInfo},
		{"server error", "POST", "/api/v1/tasks", "", 500, slog.LevelWarn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.client != "" {
				r.Header.Set(ClientHeader, tt.client)
			}
			require.Equal(t, tt.want, requestLevel(r, tt.status))
		})
	}
	// A client that left first is logged at DEBUG whatever the answer:
	// thousands of long-polls whose clients close are no warning.
	for _, status := range []int{200, 404, 500, 503} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/tasks/x?wait=60s", nil)
		require.Equal(t, slog.LevelDebug, requestLevel(r, status), "status %d", status)
	}
}

// TestPollingLoggedAtDebug checks the access log end to end: at INFO, the
// probes and the dashboard's reads leave no line; a submission does.
func TestPollingLoggedAtDebug(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	logs := &syncBuffer{}
	b.api.access = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/health", "").status)
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/queues", "", ClientHeader, "dashboard").status)
	require.Empty(t, logs.String())
	require.Equal(t, http.StatusAccepted, b.post(t, `{"task_type": "a"}`).status)
	require.Contains(t, logs.String(), `"path":"/api/v1/tasks"`)
}

// TestClientGoneNotWarned: an error met after the client left (a Redis
// read cut short looks like a broken connection) is logged at DEBUG, not
// as a Redis outage.
func TestClientGoneNotWarned(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/tasks/x?wait=60s", nil)
	b.api.writeError(httptest.NewRecorder(), r, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})
	require.NotContains(t, b.logs.String(), `"level":"WARN"`)
	require.Contains(t, b.logs.String(), "request abandoned by the client")
}
