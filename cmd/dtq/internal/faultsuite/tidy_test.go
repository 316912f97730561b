package faultsuite

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/rdb"
)

// TestTidyUnderFaults runs the tidy pass (the one new maintenance write of
// retention) through the fault proxy: a call whose reply is lost and is
// sent again, a call cut before it is sent, and an outage. The pass ends
// with the recent index holding exactly the tasks that still exist and the
// retained counts matching them.
func TestTidyUnderFaults(t *testing.T) {
	t.Parallel()
	proxy, direct, viaProxy := proxied(t)
	ctx := context.Background()

	// 2,500 tasks succeed with a retention of 1 s (kept 0), 500 with an
	// hour, and one dead letter stays in the DLQ.
	d, err := dtq.Open(direct, &dtq.DeploymentConfig{KeyPrefix: "tidy", SucceededRetention: time.Second})
	require.NoError(t, err)
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	w, err := d.NewWorker(&dtq.WorkerConfig{Concurrency: 16, DisableScheduler: true,
		HeartbeatInterval: time.Second, VisibilityTimeout: 3 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.HandleFunc("ok", func(context.Context, *dtq.Task) (any, error) { return nil, nil })
	w.HandleFunc("fail", func(context.Context, *dtq.Task) (any, error) { return nil, dtq.Permanent(context.Canceled) })
	var subs []dtq.Submission
	for i := range 3000 {
		s := dtq.Submission{Type: "ok"}
		if i%6 == 0 {
			s.Retention = time.Hour
		}
		subs = append(subs, s)
	}
	subs = append(subs, dtq.Submission{Type: "fail"})
	for i := 0; i < len(subs); i += 500 {
		_, err := c.SubmitBatch(ctx, subs[i:min(i+500, len(subs))])
		require.NoError(t, err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	keys := rdb.NewKeys("tidy")
	require.Eventually(t, func() bool { return direct.Get(ctx, keys.Depth("default")).Val() == "0" },
		60*time.Second, 20*time.Millisecond)
	stop()
	require.NoError(t, <-done)
	// The short-lived hashes expire.
	require.Eventually(t, func() bool {
		n := 0
		iter := direct.Scan(ctx, 0, keys.TaskPrefix("default")+"*", 1000).Iterator()
		for iter.Next(ctx) {
			n++
		}
		return n == 501
	}, 30*time.Second, 100*time.Millisecond)

	r := rdb.New(viaProxy, "tidy")
	later := time.Now().Add(2 * time.Minute)
	step := func() (rdb.TidyResult, error) { return r.Tidy(ctx, "default", later, later) }

	proxy.CutAfter([]byte(rdb.ScriptHash("tidy")), 1) // lands, reply lost, sent again
	res, err := step()
	require.NoError(t, err)
	require.Equal(t, rdb.TidyBatch, res.Examined)
	require.Equal(t, int64(1), proxy.Cuts())
	proxy.CutBefore([]byte(rdb.ScriptHash("tidy")), 1) // never reaches Redis, sent again
	_, err = step()
	require.NoError(t, err)
	proxy.SetDown(true)
	_, err = step()
	require.Error(t, err, "an outage fails the call")
	proxy.SetDown(false)
	for range 10 {
		if res, err = step(); err == nil && res.Wrapped {
			break
		}
	}
	require.NoError(t, err)
	require.True(t, res.Wrapped)

	// What is left: the ids of the 501 tasks that exist, nothing else, and
	// the counts of the ones kept (the ended buckets were pruned).
	members := direct.LRange(ctx, keys.Recent("default"), 0, -1).Val()
	require.Len(t, members, 501)
	insp := d.Inspector()
	page, err := insp.ListTasks(ctx, &dtq.TaskListParams{Queue: "default", Limit: 1000})
	require.NoError(t, err)
	require.Len(t, page.Items, 501, "every listed task exists")
	qi, err := insp.GetQueue(ctx, "default")
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"succeeded": 500}, qi.Retained, "the dead letter is in the DLQ: "+strconv.FormatInt(qi.DLQ, 10))
}
