package dtq_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestRestrictedRedisUser: dtq runs its whole cycle — ready check, single,
// keyed and batch submissions, a workflow, a worker finishing and failing
// tasks, the dead-letter queue, listings — as an ACL user denied
// the commands managed services refuse, and as one also denied INFO.
func TestRestrictedRedisUser(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		rules   []string
		unknown []string // the checks ReadyChecks cannot make
	}{
		{"managed", redistest.ManagedDenied, nil}, // the eviction policy from INFO
		{"no INFO either", append(slices.Clone(redistest.ManagedDenied), "-info"), []string{dtq.CheckRedisVersion, dtq.CheckMaxmemoryPolicy}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv, err := redistest.Start()
			require.NoError(t, err)
			t.Cleanup(srv.Stop)
			admin := srv.Client(t)
			setUser := []any{"ACL", "SETUSER", "dtq", "on", ">secret", "~*", "&*", "+@all"}
			for _, r := range tc.rules {
				setUser = append(setUser, r)
			}
			require.NoError(t, admin.Do(ctx, setUser...).Err())
			rc := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "dtq", Password: "secret"})
			t.Cleanup(func() { _ = rc.Close() })
			err = rc.ConfigGet(ctx, "maxmemory-policy").Err()
			require.ErrorContains(t, err, "NOPERM", "the user is restricted")

			runCycle(t, rc)
		})
	}
}

// runCycle runs dtq's cycle on rc: the ready check, keyed, single and
// batch submissions, a two-node workflow across queues, a worker finishing
// and failing tasks, the dead-letter queue, listings and an idempotent
// replay.
func runCycle(t *testing.T, rc redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	d, err := dtq.Open(rc, nil)
	require.NoError(t, err)
	require.NoError(t, d.Inspector().Ready(ctx), "ready: what cannot be read is not held against the server")
	client, err := d.NewClient(nil)
	require.NoError(t, err)

	var ids []string
	ok, err := client.Submit(ctx, dtq.Submission{Queue: "q", Type: "ok", Payload: map[string]any{}, IdempotencyKey: "k1"})
	require.NoError(t, err)
	ids = append(ids, ok.TaskID)
	bad, err := client.Submit(ctx, dtq.Submission{Queue: "q", Type: "bad", Payload: map[string]any{}, MaxAttempts: 1})
	require.NoError(t, err)
	batch := make([]dtq.Submission, 300) // more than one ingest call
	for i := range batch {
		batch[i] = dtq.Submission{Queue: "q", Type: "ok", Payload: map[string]any{"i": i}, ConcurrencyKey: fmt.Sprint("c", i%7)}
	}
	items, err := client.SubmitBatch(ctx, batch)
	require.NoError(t, err)
	for _, it := range items {
		require.NoError(t, it.Err)
		ids = append(ids, it.Result.TaskID)
	}
	wf, err := client.SubmitWorkflow(ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "a", Submission: dtq.Submission{Queue: "q", Type: "ok", Payload: map[string]any{}}},
		{Ref: "b", Deps: []string{"a"}, Submission: dtq.Submission{Queue: "q2", Type: "ok", Payload: map[string]any{}}},
	}})
	require.NoError(t, err)

	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{"q": 1, "q2": 1}, Concurrency: 8,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	w.HandleFunc("ok", func(context.Context, *dtq.Task) (any, error) { return "done", nil })
	w.HandleFunc("bad", func(context.Context, *dtq.Task) (any, error) { return nil, fmt.Errorf("no") })
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})

	in := d.Inspector()
	for _, id := range ids {
		task, err := in.WaitTask(ctx, id, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, dtqtype.StatusSucceeded, task.Status, id)
	}
	task, err := in.WaitTask(ctx, bad.TaskID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusDeadLettered, task.Status)
	info, err := in.WaitWorkflow(ctx, wf.WorkflowID, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)

	again, err := client.Submit(ctx, dtq.Submission{Queue: "q", Type: "ok", Payload: map[string]any{}, IdempotencyKey: "k1"})
	require.NoError(t, err)
	require.True(t, again.Duplicate, "replayed")
	list, err := in.ListTasks(ctx, &dtq.TaskListParams{Queue: "q", Limit: 10})
	require.NoError(t, err)
	require.Len(t, list.Items, 10)
	_, err = in.GetQueue(ctx, "q")
	require.NoError(t, err)
	dlq, err := in.ListDLQ(ctx, &dtq.DLQListParams{Queue: "q"})
	require.NoError(t, err)
	require.Len(t, dlq.Items, 1)
}

// TestSingleNodeCluster: dtq runs its cycle on one node with
// cluster-enabled yes that owns every slot, as serverless endpoints
// present themselves, through a Cluster client.
func TestSingleNodeCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := redistest.Start("--cluster-enabled", "yes")
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	admin := srv.Client(t)
	require.NoError(t, admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err())
	require.Eventually(t, func() bool {
		info, err := admin.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}, 30*time.Second, 50*time.Millisecond, "the node owns every slot")
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}})
	t.Cleanup(func() { _ = rc.Close() })
	runCycle(t, rc)
}

// TestLargestBatchKeepsCallsShort: the largest batch the HTTP API takes
// (1,000 submissions), each with every optional field, goes to Redis in
// calls of at most 3,999 arguments (the test client fails a longer one)
// and creates every task.
func TestLargestBatchKeepsCallsShort(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	subs := make([]dtq.Submission, 1000)
	prio := 7
	for i := range subs {
		subs[i] = dtq.Submission{Queue: "q", Type: "t", Payload: map[string]any{"i": i}, Priority: &prio,
			MaxAttempts: 3, Timeout: time.Minute, Delay: time.Hour, ExpiresAt: time.Now().Add(2 * time.Hour),
			Metadata: map[string]any{"m": i}, IdempotencyKey: fmt.Sprint("idem-", i), ConcurrencyKey: fmt.Sprint("c", i%5),
			Retention: time.Hour, KeepPayload: true, Dedup: &dtq.Dedup{Key: fmt.Sprint("d", i), Mode: dtq.DedupDrop}}
	}
	items, err := b.client.SubmitBatch(b.ctx, subs)
	require.NoError(t, err)
	require.Len(t, items, len(subs))
	seen := map[string]bool{}
	for i, it := range items {
		require.NoError(t, it.Err, i)
		require.False(t, it.Result.Duplicate, i)
		seen[it.Result.TaskID] = true
	}
	require.Len(t, seen, len(subs), "a task each")
}

// TestSuiteRunsAsARestrictedUser: the package's tests talk to Redis as a
// user denied what managed services refuse (TestMain: redistest.Restricted).
func TestSuiteRunsAsARestrictedUser(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, cmd := range [][]any{{"CONFIG", "GET", "maxmemory"}, {"KEYS", "*"}, {"SCAN", 0}, {"FLUSHDB"}} {
		require.ErrorContains(t, s.Client.Do(context.Background(), cmd...).Err(), "NOPERM", "%v", cmd)
	}
}
