package web_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOverviewFlagsUnservedQueues submits to a queue no worker serves: the
// Overview's queue table marks it "no worker", and a served queue stays
// "active".
func TestOverviewFlagsUnservedQueues(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.submit(t, `{"task_type": "echo", "queue": "orphans"}`)
	done := b.submit(t, `{"task_type": "echo"}`)
	b.waitStatus(t, done.TaskID, "succeeded")

	tb := newTab(t, b)
	tb.open("/")
	tb.waitPage("overview")
	tb.waitFor(`document.querySelector('tr[data-queue="orphans"] .st-unserved')?.textContent === 'no worker'`)
	tb.waitFor(`document.querySelector('tr[data-queue="default"] .st-active') !== null`)
	require.Nil(t, eval[any](tb, `document.querySelector('tr[data-queue="default"] .st-unserved')`))
	require.Contains(t, eval[string](tb, `document.querySelector('tr[data-queue="orphans"] .st-unserved').title`), "No live worker serves queue orphans")
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}
