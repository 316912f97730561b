package faultsuite

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/workertest"
)

// TestProgressUnderLostReplies: a worker's progress writes go through the
// fault proxy, which loses the replies of some (the script ran; go-redis
// and the worker send it again) and cuts others before they reach Redis.
// Every line the handler logged is in the attempt's log exactly once, in
// order, and the last progress value is the task's.
func TestProgressUnderLostReplies(t *testing.T) {
	t.Parallel()
	proxy, direct, viaProxy := proxied(t)
	ctx := context.Background()
	const prefix = "progress"
	w, err := openDeployment(t, viaProxy, prefix).NewWorker(&dtq.WorkerConfig{Concurrency: 4, VisibilityTimeout: 6 * time.Second,
		HeartbeatInterval: 2 * time.Second, DrainTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	const lines = 40
	w.HandleFunc("report", func(ctx context.Context, task *dtq.Task) (any, error) {
		for i := range lines {
			dtq.Logger(ctx).Info("line", "i", i)
			if err := dtq.Progress(ctx, i+1); err != nil {
				return nil, err
			}
			time.Sleep(75 * time.Millisecond) // three seconds: several writes
		}
		return nil, nil
	})
	workertest.Run(t, w)
	dep := openDeployment(t, direct, prefix)
	client, err := dep.NewClient(nil)
	require.NoError(t, err)
	insp := dep.Inspector()

	hash := []byte(rdb.ScriptHash("progress"))
	for _, tc := range []struct {
		name string
		arm  func()
	}{
		{"replies lost", func() { proxy.CutAfter(hash, 3) }},
		{"cut before Redis", func() { proxy.CutBefore(hash, 3) }},
	} {
		cuts := proxy.Cuts()
		tc.arm()
		res, err := client.Submit(ctx, dtq.Submission{Type: "report"})
		require.NoError(t, err, tc.name)
		var ti *dtqtype.TaskInfo
		require.Eventually(t, func() bool {
			ti, err = insp.GetTask(ctx, res.TaskID)
			return err == nil && ti.Status.Terminal()
		}, 60*time.Second, 20*time.Millisecond, tc.name)
		proxy.CutAfter(nil, 0)
		require.Equal(t, dtqtype.StatusSucceeded, ti.Status, tc.name)
		require.Greater(t, proxy.Cuts(), cuts, "%s: no write was cut", tc.name)
		require.JSONEq(t, fmt.Sprint(lines), string(ti.Progress), tc.name)
		page, err := insp.TaskLogs(ctx, res.TaskID, dtq.TaskLogsParams{Limit: 1000})
		require.NoError(t, err)
		got := make([]string, 0, len(page.Items))
		for _, it := range page.Items {
			got = append(got, it.Line)
		}
		want := make([]string, lines)
		for i := range want {
			want[i] = fmt.Sprintf("level=INFO msg=line i=%d", i)
		}
		require.Equal(t, want, got, "%s: every line once, in order", tc.name)
		t.Logf("%s: %d lines once each, %d writes cut", tc.name, lines, proxy.Cuts()-cuts)
	}
}
