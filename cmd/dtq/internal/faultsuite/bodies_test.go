package faultsuite

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/rdbtest"
	"github.com/dtq-io/dtq/internal/redistest"
)

// proxied starts a Redis server of the test's own and a fault proxy in
// front of it; it returns the proxy, a client straight to the server and a
// client through the proxy that retries a call whose connection was cut.
func proxied(t *testing.T) (*faultproxy.Proxy, *redis.Client, *redis.Client) {
	t.Helper()
	srv, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	proxy, err := faultproxy.Start(srv.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: 3,
		MinRetryBackoff: 20 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond})
	t.Cleanup(func() { _ = viaProxy.Close() })
	return proxy, srv.Client(t), viaProxy
}

// TestQueuedBodiesUnderFaults: a queued task's payload and metadata ride in
// its band stream entry, and every script that takes the entry away without
// starting the task (cancel, purge, the expiry sweep, expiry at claim, a
// key-concurrency hold) moves them into the task hash first. Each runs
// through the fault proxy twice: once with its reply lost (the call landed
// and is sent again, so the script runs a second time on what the first
// left) and once cut before it reached Redis. Every task must then read
// with its own payload and metadata, and no band stream keeps an entry.
func TestQueuedBodiesUnderFaults(t *testing.T) {
	t.Parallel()
	proxy, direct, viaProxy := proxied(t)
	ctx := context.Background()
	const prefix = "bodies"
	b := rdbtest.NewBodyChecker(t, direct, prefix)
	r := rdb.New(viaProxy, prefix)
	f := rdbtest.New(r)
	as, ws := f.Admin, f.Settings
	later := time.Now().Add(time.Hour) // past every task's expiry

	faults := []struct {
		name string
		arm  func(script string)
	}{
		{"reply lost", func(script string) { proxy.CutAfter([]byte(rdb.ScriptHash(script)), 1) }},
		{"cut before", func(script string) { proxy.CutBefore([]byte(rdb.ScriptHash(script)), 1) }},
	}

	for _, f := range faults {
		q := "cancel-" + strings.ReplaceAll(f.name, " ", "-")
		t.Run("cancel/"+f.name, func(t *testing.T) {
			id := b.Submit(t, q, "c", nil)
			cuts := proxy.Cuts()
			f.arm("cancel")
			out, _, err := r.CancelTask(ctx, q, id, as, time.Now(), "test")
			require.NoError(t, err)
			require.Equal(t, cuts+1, proxy.Cuts())
			// The second run of a cancel that landed finds it ended.
			require.Contains(t, []string{"cancelled", rdb.OutcomeTerminal}, out)
			b.Require(t, id, "c", dtqtype.StatusCancelled)
			b.RequireNoBandEntries(t, q)
		})

		q = "purge-" + strings.ReplaceAll(f.name, " ", "-")
		t.Run("purge/"+f.name, func(t *testing.T) {
			low, high := b.Submit(t, q, "a", nil), b.Submit(t, q, "b", func(s *dtq.Submission) { s.Priority = new(9) })
			cuts := proxy.Cuts()
			f.arm("purge_band")
			_, err := r.PurgeQueue(ctx, q, as, time.Now())
			require.NoError(t, err)
			require.Equal(t, cuts+1, proxy.Cuts())
			b.Require(t, low, "a", dtqtype.StatusCancelled)
			b.Require(t, high, "b", dtqtype.StatusCancelled)
			b.RequireNoBandEntries(t, q)
		})

		q = "sweep-" + strings.ReplaceAll(f.name, " ", "-")
		t.Run("expiry sweep/"+f.name, func(t *testing.T) {
			id := b.Submit(t, q, "s", rdbtest.Expiring)
			cuts := proxy.Cuts()
			f.arm("sweep_expired")
			_, err := r.SweepExpired(ctx, q, ws, later)
			require.NoError(t, err)
			require.Equal(t, cuts+1, proxy.Cuts())
			b.Require(t, id, "s", dtqtype.StatusExpired)
			b.RequireNoBandEntries(t, q)
		})

		q = "claim-" + strings.ReplaceAll(f.name, " ", "-")
		t.Run("expiry at claim and hold/"+f.name, func(t *testing.T) {
			require.NoError(t, r.EnsureGroups(ctx, q))
			_, err := r.SetLimits(ctx, q, &dtqtype.QueueLimits{KeyConcurrency: 1})
			require.NoError(t, err)
			gone := b.Submit(t, q, "e", rdbtest.Expiring)
			first := b.Submit(t, q, "k1", rdbtest.Keyed)
			held := b.Submit(t, q, "k2", rdbtest.Keyed)
			cuts := proxy.Cuts()
			f.arm("claim")
			// Sent again with the same nonce, the claim answers what its
			// first run started.
			cr, err := r.Claim(ctx, q, ws, 10, later, "nonce-"+q)
			require.NoError(t, err)
			require.Equal(t, cuts+1, proxy.Cuts())
			require.Len(t, cr.Tasks, 1)
			require.Equal(t, first, cr.Tasks[0].ID)
			var p map[string]string
			require.NoError(t, json.Unmarshal(cr.Tasks[0].Payload, &p))
			require.Equal(t, "k1", p["name"])
			b.Require(t, first, "k1", dtqtype.StatusRunning)
			b.Require(t, held, "k2", dtqtype.StatusQueued)
			b.Require(t, gone, "e", dtqtype.StatusExpired)
			b.RequireNoBandEntries(t, q)
		})
	}
}
