package httpapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestRedisMemoryIsVisibleAndOOMIs503: Redis's memory shows in /ready
// (warnings past 80 % of maxmemory, never a failure), in the queue list and
// in /metrics; a submission Redis refuses for memory is 503
// REDIS_UNAVAILABLE naming memory, counted as redis_oom, and writes nothing.
func TestRedisMemoryIsVisibleAndOOMIs503(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start("--maxmemory", "64mb")
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	rc := srv.Client(t)
	b := setup(t, options{redis: &redistest.Setup{Server: srv, Client: rc, Prefix: "oom"}})

	ready := func() (int, []string) {
		res := b.do(t, http.MethodGet, "/ready", "")
		var body struct {
			Warnings []string `json:"warnings"`
		}
		require.NoError(t, json.Unmarshal(res.body, &body))
		return res.status, body.Warnings
	}
	status, warnings := ready()
	require.Equal(t, http.StatusOK, status)
	require.Empty(t, warnings, "a few MB of 64 MB")

	var page struct {
		RedisMemory *dtqtype.RedisMemory `json:"redis_memory"`
	}
	b.do(t, http.MethodGet, "/api/v1/queues", "").decode(t, &page)
	require.NotNil(t, page.RedisMemory)
	require.EqualValues(t, 64<<20, page.RedisMemory.MaxBytes)
	require.Positive(t, page.RedisMemory.UsedBytes)
	metrics := string(b.do(t, http.MethodGet, "/metrics", "").body)
	require.Contains(t, metrics, "dtq_redis_maxmemory_bytes 6.7108864e+07")
	require.Contains(t, metrics, "dtq_redis_used_memory_bytes ")

	// Redis is full: maxmemory under what it uses, no eviction.
	b.do(t, http.MethodPost, "/api/v1/tasks", `{"task_type":"echo"}`) // the queue exists
	depth := rc.Get(b.ctx, b.keys.Depth("default")).Val()
	keys := rc.DBSize(b.ctx).Val()
	require.NoError(t, rc.ConfigSet(b.ctx, "maxmemory", "1mb").Err())
	t.Cleanup(func() { rc.ConfigSet(b.ctx, "maxmemory", "0") })

	status, warnings = ready()
	require.Equal(t, http.StatusOK, status, "memory is reported, not failed on")
	require.Len(t, warnings, 1)
	require.Contains(t, warnings[0], "of maxmemory")

	res := b.do(t, http.MethodPost, "/api/v1/tasks", `{"task_type":"echo","payload":{"n":1}}`, "Idempotency-Key", "k1")
	res.requireError(t, http.StatusServiceUnavailable, codeRedisUnavailable, "")
	require.Contains(t, string(res.body), "out of memory")
	require.Contains(t, string(res.body), "nothing was written")
	require.Equal(t, depth, rc.Get(b.ctx, b.keys.Depth("default")).Val())
	require.Equal(t, keys, rc.DBSize(b.ctx).Val(), "no key was written")
	require.Contains(t, string(b.do(t, http.MethodGet, "/metrics", "").body), `dtq_tasks_rejected_total{reason="redis_oom"} 1`)

	// Memory back: the same submission goes through.
	require.NoError(t, rc.ConfigSet(b.ctx, "maxmemory", "64mb").Err())
	res = b.do(t, http.MethodPost, "/api/v1/tasks", `{"task_type":"echo","payload":{"n":1}}`, "Idempotency-Key", "k1")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
}
