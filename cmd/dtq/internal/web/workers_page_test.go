package web_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
)

// TestWorkersPageFollowsPages: with more worker records than one page of
// GET /api/v1/workers holds, the workers page lists them all (it follows
// next_cursor) and the overview says its count is of the first page.
func TestWorkersPageFollowsPages(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	r := rdb.New(b.rc, b.prefix)
	now := time.Now()
	const n = 1005 // past the overview's page of 1000
	for i := range n {
		require.NoError(t, r.RemoteWorkerBeat(b.ctx, &rdb.RemoteWorker{ID: fmt.Sprintf("py-%04d", i), Mode: rdb.RemoteClaim,
			LeaseEnd: now.Add(time.Hour), Interval: time.Hour, EventsMax: 100}, now))
	}
	tb := newTab(t, b)
	tb.open("/workers")
	tb.waitPage("workers")
	tb.waitFor(`document.querySelectorAll('#workers-table tr[data-worker-id]').length >= 1005`)
	require.NotNil(t, eval[any](tb, `document.querySelector('#workers-table tr[data-worker-id="py-1004"]')`))

	tb.open("/")
	tb.waitPage("overview")
	tb.waitFor(`document.querySelector('#ov-workers')?.closest('.stat').textContent.includes('in the first 1,000 worker records')`)
	require.Equal(t, "1,000+", eval[string](tb, `document.querySelector('#ov-workers').textContent`))
}

// TestWorkersPageTellsStoppedFromStale: a worker that shut down cleanly is
// "stopped", one that went silent "stale", a running one "live".
func TestWorkersPageTellsStoppedFromStale(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	stop := b.startWorker(t, "went-home", map[string]int{"default": 1})
	b.startWorker(t, "still-here", map[string]int{"default": 1})
	r := rdb.New(b.rc, b.prefix)
	long := time.Now().Add(-time.Hour)
	require.NoError(t, r.RemoteWorkerBeat(b.ctx, &rdb.RemoteWorker{ID: "went-silent", Mode: rdb.RemoteClaim,
		LeaseEnd: long.Add(time.Minute), Interval: time.Second, EventsMax: 100}, long))
	tb := newTab(t, b)
	tb.open("/workers")
	tb.waitPage("workers")
	tb.waitFor(`document.querySelector('#workers-table tr[data-worker-id="went-home"] [data-state]')?.dataset.state === 'live'`)
	stop()
	tb.waitFor(`document.querySelector('#workers-table tr[data-worker-id="went-home"] [data-state]')?.dataset.state === 'stopped'`)
	require.Equal(t, "live", eval[string](tb, `document.querySelector('#workers-table tr[data-worker-id="still-here"] [data-state]').dataset.state`))
	require.Equal(t, "stale", eval[string](tb, `document.querySelector('#workers-table tr[data-worker-id="went-silent"] [data-state]').dataset.state`))
	require.Contains(t, eval[string](tb, `document.querySelector('main').textContent`), "2 live, 1 stopped, 1 stale", "the bundle's own worker is live too")
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}
