package web_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
)

var screenshots = flag.Bool("screenshots", false, "write PNG screenshots of every dashboard page to docs/img")

// shotDir is where the screenshots go, relative to this package.
const shotDir = "../../../../docs/img"

// TestScreenshots renders every page over a small, busy system and writes
// the images used by docs/dashboard.md. It runs only with -screenshots
// (make screenshots).
func TestScreenshots(t *testing.T) {
	if !*screenshots {
		t.Skip("regenerate the docs/img screenshots with: make screenshots")
	}
	b := setup(t, options{keys: true, queues: map[string]int{"default": 3, "emails": 2, "reports": 1}})
	b.backfillStats(t, map[string]float64{"default": 42, "emails": 9, "reports": 3})
	stopOld := b.startWorker(t, "batch-7f3c", map[string]int{"reports": 1})

	// Work of every kind: successes, retries that recover, dead letters
	// with different error classes, delayed tasks.
	flaky := b.submit(t, `{"task_type": "flaky", "payload": {"fail_times": 2}, "metadata": {"source": "checkout"}}`)
	for i := range 12 {
		b.submit(t, fmt.Sprintf(`{"task_type": "fibonacci", "payload": {"n": %d}, "priority": %d}`, 30+i, i%10))
		b.submit(t, fmt.Sprintf(`{"task_type": "send_receipt", "queue": "emails", "payload": {"order_id": %d}, "idempotency_key": "order-%d"}`, 1000+i, 1000+i))
	}
	dead := []task{
		b.submit(t, `{"task_type": "always_fail", "queue": "emails", "max_attempts": 3, "payload": {"to": "ops@example.com"}}`),
		b.submit(t, `{"task_type": "fibonacci", "payload": {"n": 400}}`),
		b.submit(t, `{"task_type": "sleep", "queue": "reports", "payload": {"seconds": 2}, "timeout_ms": 100, "max_attempts": 2}`),
	}
	for i := range 4 {
		b.submit(t, fmt.Sprintf(`{"task_type": "counter_task", "queue": "reports", "payload": {"counter": "nightly"}, "delay_ms": %d}`, (i+1)*3600000))
	}
	b.waitStatus(t, flaky.TaskID, "succeeded")
	for _, d := range dead {
		b.waitStatus(t, d.TaskID, "dead_lettered")
	}
	stopOld() // shows as a stopped worker

	tb := newTabSized(t, b, 1280, 800)
	tb.open("/")
	tb.signIn(adminKey)
	tb.waitPage("overview")
	tb.waitFor(`document.querySelector('#conn').dataset.state === 'live'`)

	// A few waves of short tasks, so that depth and throughput move.
	tick := time.NewTicker(1500 * time.Millisecond)
	defer tick.Stop()
	for wave := range 12 {
		n := 6 + int(8*math.Abs(math.Sin(float64(wave)/2)))
		for i := range n {
			b.submit(t, fmt.Sprintf(`{"task_type": "sleep", "payload": {"seconds": 0.%d}, "priority": %d}`, 2+i%6, i%10))
		}
		if wave == 2 {
			flaky = b.submit(t, `{"task_type": "flaky", "queue": "emails", "payload": {"fail_times": 2}, "metadata": {"order": 4711}}`)
		}
		<-tick.C
	}
	// Leave some work queued and running for the pictures.
	require.Equal(t, 200, b.call(t, "POST", "/api/v1/queues/reports/pause", "", nil))
	for i := range 5 {
		b.submit(t, fmt.Sprintf(`{"task_type": "sleep", "queue": "reports", "payload": {"seconds": %d}}`, 30+i))
	}
	for i := range 8 {
		b.submit(t, fmt.Sprintf(`{"task_type": "sleep", "payload": {"seconds": %d}, "priority": %d}`, 20+i, []int{9, 7, 5, 5, 3, 1, 0, 5}[i]))
	}
	tb.waitFor(`Number(document.querySelector('#ov-running').dataset.value) > 0`)
	tb.waitFor(`document.querySelector('#ov-queues tr[data-queue="reports"] .st-paused')`)
	b.waitStatus(t, flaky.TaskID, "succeeded")

	require.NoError(t, os.MkdirAll(shotDir, 0o755))
	shoot := func(name string, full bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
		defer cancel()
		// Let charts and counters settle on the latest refresh.
		tb.do(chromedp.Evaluate[chromedp.Void](`document.activeElement?.blur()`))
		var buf []byte
		var err error
		if full {
			buf, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
		} else {
			buf, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
		}
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shotDir, name+".png"), buf, 0o644))
	}

	tb.waitFor(`document.querySelectorAll('#ov-queues tbody tr[data-queue]').length === 3`)
	shoot("overview", false)

	tb.goTo("/tasks")
	tb.waitPage("tasks")
	shoot("tasks", false)

	tb.goTo("/tasks/" + flaky.TaskID)
	tb.waitPage("task")
	tb.waitFor(`document.querySelectorAll('#task-attempts li').length >= 3`)
	tb.waitFor(`document.querySelectorAll('#task-events tr[data-event-id]').length >= 7`)
	shoot("task", true)

	tb.goTo("/queues")
	tb.waitPage("queues")
	tb.waitFor(`document.querySelector('#queues-table tr[data-queue="reports"]')?.dataset.paused === 'true'`)
	shoot("queues", false)

	tb.goTo("/dlq")
	tb.waitPage("dlq")
	tb.waitFor(`document.querySelectorAll('#dlq-list article').length === 3`)
	tb.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('#dlq-list article details').open = true`))
	shoot("dlq", false)

	tb.goTo("/workers")
	tb.waitPage("workers")
	tb.waitFor(`document.querySelectorAll('#workers-table tr[data-worker-id]').length === 2`)
	shoot("workers", false)

	// Workflows: one drawn while it runs, one failed, one too large to
	// draw (summarized per layer), on a queue of their own (the others are
	// busy with long sleeps by now).
	b.startWorker(t, "media-2a41", map[string]int{"media": 1})
	order := b.submitWorkflow(t, "order-4711", []wfNode{
		{Ref: "fetch", TaskType: "echo", Queue: "media"},
		{Ref: "resize-small", TaskType: "sleep", Queue: "media", Payload: map[string]any{"seconds": 0.3}, Deps: []string{"fetch"}},
		{Ref: "resize-medium", TaskType: "sleep", Queue: "media", Payload: map[string]any{"seconds": 20}, Deps: []string{"fetch"}},
		{Ref: "resize-large", TaskType: "sleep", Queue: "media", Payload: map[string]any{"seconds": 25}, Deps: []string{"fetch"}},
		{Ref: "scan", TaskType: "echo", Queue: "media", Deps: []string{"fetch"}},
		{Ref: "thumbs", TaskType: "echo", Queue: "media", Deps: []string{"resize-small"}},
		{Ref: "upload", TaskType: "echo", Queue: "media", Deps: []string{"resize-small", "resize-medium", "resize-large", "thumbs"}},
		{Ref: "index", TaskType: "echo", Queue: "media", Deps: []string{"scan", "upload"}},
		{Ref: "receipt", TaskType: "send_receipt", Queue: "emails", Payload: map[string]any{"order_id": 4711}, Deps: []string{"upload"}},
		{Ref: "notify", TaskType: "echo", Queue: "media", Deps: []string{"index", "receipt"}},
	})
	b.submitWorkflow(t, "import-2024-06", []wfNode{
		{Ref: "load", TaskType: "always_fail", Queue: "media", Attempts: 1},
		{Ref: "validate", TaskType: "echo", Queue: "media", Deps: []string{"load"}},
		{Ref: "publish", TaskType: "echo", Queue: "media", Deps: []string{"validate"}},
	})
	b.submitWorkflow(t, "order-4710", []wfNode{{Ref: "fetch", TaskType: "echo", Queue: "media"}, {Ref: "notify", TaskType: "echo", Queue: "media", Deps: []string{"fetch"}}})

	tb.goTo("/workflows")
	tb.waitPage("workflows")
	tb.waitFor(`document.querySelectorAll('#workflows-table tbody tr[data-counts]').length === 3`)
	tb.waitFor(`document.querySelector('#workflows-table tr[data-status="failed"]')`)
	shoot("workflows", false)

	tb.goTo("/workflows/" + order.WorkflowID)
	tb.waitPage("workflow")
	tb.waitFor(`document.querySelector('#wf-dag .dag-node[data-ref="resize-medium"]')?.dataset.status === 'running'`)
	tb.waitFor(`document.querySelector('#wf-dag .dag-node[data-ref="thumbs"]')?.dataset.status === 'succeeded'`)
	shoot("workflow", true)

	big := []wfNode{{Ref: "plan", TaskType: "echo", Queue: "media"}}
	for i := range 300 {
		big = append(big, wfNode{Ref: fmt.Sprintf("shard-%03d", i), TaskType: "sleep", Queue: "media",
			Payload: map[string]any{"seconds": 0.1}, Deps: []string{"plan"}})
	}
	joins := make([]string, 0, 300)
	for i := range 300 {
		joins = append(joins, fmt.Sprintf("shard-%03d", i))
	}
	big = append(big, wfNode{Ref: "merge", TaskType: "echo", Queue: "media", Deps: joins}, wfNode{Ref: "report", TaskType: "echo", Queue: "media", Deps: []string{"merge"}})
	reindex := b.submitWorkflow(t, "reindex", big)
	tb.goTo("/workflows/" + reindex.WorkflowID)
	tb.waitPage("workflow")
	tb.waitFor(`document.querySelector('#wf-graph')?.dataset.mode === 'summary'`)
	tb.waitFor(`JSON.parse(document.querySelector('#wf-layers tr[data-layer="1"]')?.dataset.counts || '{}').succeeded > 40`)
	shoot("workflow-summary", false)

	tb.goTo("/events")
	tb.waitPage("events")
	b.submit(t, `{"task_type": "flaky", "queue": "emails", "payload": {"fail_times": 1}}`)
	b.submit(t, `{"task_type": "echo", "payload": {"hello": "dtq"}}`)
	tb.waitFor(`document.querySelectorAll('#events-table tbody tr[data-event-id]').length >= 12`)
	shoot("events", false)

	phone := newTab(t, b)
	phone.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	phone.open("/")
	phone.signIn(adminKey)
	phone.waitPage("overview")
	phone.waitFor(`document.querySelector('#ov-redis').textContent === 'Ready'`)
	ctx, cancel := context.WithTimeout(phone.ctx, actionTimeout)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(shotDir, "overview-phone.png"), buf, 0o644))
}

// backfillStats gives the throughput chart a history to show: the scripts
// keep per-minute counters for two hours, and a fresh test system has only
// the current minute. perMinute is the rough success rate per queue.
func (b *bundle) backfillStats(t *testing.T, perMinute map[string]float64) {
	t.Helper()
	keys := rdb.NewKeys(b.prefix)
	now := time.Now().Unix() / 60
	for q, rate := range perMinute {
		for m := now - 14; m < now; m++ {
			phase := float64(m%60) / 3
			ok := int64(rate * (1 + 0.45*math.Sin(phase)))
			dead := int64(math.Max(0, math.Round(rate/40*(1+math.Cos(phase*1.7)))))
			f := map[string]any{"succeeded": ok, "started": ok + ok/12, "retried": ok / 12, "dead_lettered": dead}
			// Latency buckets: index k counts samples in [2^(k-1), 2^k) ms.
			for k, div := range map[int]int64{4: 3, 5: 3, 7: 4, 10: 12} {
				f[fmt.Sprintf("wait_b%d", k)] = ok / div
			}
			for k, div := range map[int]int64{2: 5, 6: 3, 8: 3, 11: 8} {
				f[fmt.Sprintf("run_b%d", k)] = ok / div
			}
			require.NoError(t, b.rc.HSet(context.Background(), keys.Stats(q, m), f).Err())
			require.NoError(t, b.rc.Expire(context.Background(), keys.Stats(q, m), 2*time.Hour).Err())
		}
	}
}
