package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/internal/redistest"
)

// probe answers GET path on srv: the status and the JSON body.
func probe(t *testing.T, srv *httptest.Server, path string) (int, map[string]string) {
	t.Helper()
	res, err := httpClient.Get(srv.URL + path)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	if path == "/metrics" {
		return res.StatusCode, map[string]string{"page": string(raw)}
	}
	require.Equal(t, "application/json", res.Header.Get("Content-Type"))
	var body map[string]string
	require.NoError(t, json.Unmarshal(raw, &body), "%s answered %s", path, raw)
	return res.StatusCode, body
}

// waitProbe polls path until it answers status, and returns the body.
func waitProbe(t *testing.T, srv *httptest.Server, path string, status int) map[string]string {
	t.Helper()
	var body map[string]string
	require.Eventually(t, func() bool {
		var code int
		code, body = probe(t, srv, path)
		return code == status
	}, 15*time.Second, 10*time.Millisecond, "%s never answered %d; last body %v", path, status, body)
	return body
}

// TestWorkerProbes follows a worker's /health and /ready through its life:
// starting (not registered), running, Redis gone, Redis back, draining.
func TestWorkerProbes(t *testing.T) {
	t.Parallel()
	rs, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(rs.Stop)

	cfg := config.Default()
	cfg.RedisURL = rs.URL()
	cfg.KeyPrefix = "probes"
	cfg.DrainTimeout = time.Second
	cfg.Queues = []config.QueueWeight{{Name: "mail", Weight: 1}}
	rc, err := config.NewRedisClient(cfg.RedisURL)
	require.NoError(t, err)
	t.Cleanup(func() { rc.Close() })
	log := slog.New(slog.DiscardHandler)
	w, err := newExampleWorker(cfg, rc, false, log)
	require.NoError(t, err)
	srv := httptest.NewServer(workerProbeMux(w, log))
	t.Cleanup(srv.Close)

	code, body := probe(t, srv, "/health")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, map[string]string{"status": "ok"}, body)
	code, body = probe(t, srv, "/ready")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not_ready", body["status"])
	require.Equal(t, "registered", body["check"])
	require.Contains(t, body["message"], "has not registered")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Equal(t, map[string]string{"status": "ready"}, waitProbe(t, srv, "/ready", http.StatusOK))

	// Counters exist at zero from the start, with the build's labels.
	_, m := probe(t, srv, "/metrics")
	page := m["page"]
	require.Contains(t, page, `dtq_tasks_dead_lettered_total{queue="mail",task_type="echo"} 0`)
	require.Contains(t, page, `dtq_task_attempts_total{queue="mail",result="failure",task_type="flaky"} 0`)
	require.Contains(t, page, `dtq_lease_lost_total{queue="mail"} 0`)
	require.Contains(t, page, `dtq_tasks_throttled_total{queue="mail",reason="rate"} 0`)
	require.Regexp(t, `dtq_build_info\{goversion="go[^"]+",revision="[^"]+",version="[^"]+"\} 1`, page)

	rs.Kill()
	body = waitProbe(t, srv, "/ready", http.StatusServiceUnavailable)
	require.Equal(t, "redis", body["check"])
	require.Equal(t, "not ready: Redis does not answer", body["message"])
	code, _ = probe(t, srv, "/health")
	require.Equal(t, http.StatusOK, code, "/health touches nothing")

	require.NoError(t, rs.Restart())
	waitProbe(t, srv, "/ready", http.StatusOK)

	cancel()
	body = waitProbe(t, srv, "/ready", http.StatusServiceUnavailable)
	require.Equal(t, "draining", body["check"])
	require.NoError(t, <-done)
	done <- nil // for the cleanup
}
