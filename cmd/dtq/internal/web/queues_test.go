package web_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// queueExists reports whether the API knows q.
func (b *bundle) queueExists(t *testing.T, q string) bool {
	t.Helper()
	code := b.call(t, http.MethodGet, "/api/v1/queues/"+q, "", nil)
	require.Contains(t, []int{http.StatusOK, http.StatusNotFound}, code)
	return code == http.StatusOK
}

// TestCreateAndDeleteQueueByClick creates a queue with the form on the
// queues page, refuses a bad name without asking the API, and deletes the
// queue through the confirm dialog; a queue holding tasks is refused with
// the API's message.
func TestCreateAndDeleteQueueByClick(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.waitStatus(t, b.submit(t, `{"task_type": "echo"}`).TaskID, "succeeded")
	b.submit(t, `{"task_type": "echo", "queue": "held", "delay_ms": 3600000}`)

	tb := newTab(t, b)
	tb.open("/queues")
	tb.waitPage("queues")
	tb.waitFor(`document.querySelector('#queues-table tr[data-queue="held"]')`)

	// A bad name is refused in the page.
	tb.do(evalVoid(`document.querySelector('#queue-create-name').value = 'Bad Name'`))
	tb.click(`#queue-create-submit`)
	tb.waitFor(`document.querySelector('#queue-create-error').textContent.includes('lowercase')`)
	require.False(t, b.queueExists(t, "bad-name"))

	tb.do(evalVoid(`document.querySelector('#queue-create-name').value = 'reports'`))
	tb.click(`#queue-create-submit`)
	row := `#queues-table tr[data-queue="reports"]`
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')`, row))
	require.True(t, b.queueExists(t, "reports"))
	tb.waitFor(`[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('Queue reports created'))`)

	// Cancelling the dialog changes nothing.
	tb.click(row + ` button[data-action="delete"]`)
	tb.waitFor(`document.querySelector('#confirm').open`)
	require.Contains(t, eval[string](tb, `document.querySelector('#confirm-title').textContent`), "Delete queue reports")
	tb.click(`#confirm-cancel`)
	tb.waitFor(`!document.querySelector('#confirm').open`)
	require.True(t, b.queueExists(t, "reports"))

	tb.click(row + ` button[data-action="delete"]`)
	tb.waitFor(`document.querySelector('#confirm').open`)
	tb.click(`#confirm-ok`)
	require.Eventually(t, func() bool { return !b.queueExists(t, "reports") }, actionTimeout, 25*time.Millisecond)
	tb.waitFor(fmt.Sprintf(`!document.querySelector('%s')`, row))

	// A queue with a task stays, and the page says why.
	tb.click(`#queues-table tr[data-queue="held"] button[data-action="delete"]`)
	tb.waitFor(`document.querySelector('#confirm').open`)
	tb.click(`#confirm-ok`)
	tb.waitFor(`[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('QUEUE_NOT_EMPTY'))`)
	require.True(t, b.queueExists(t, "held"))
	tb.waitFor(`document.querySelector('#queues-table tr[data-queue="held"]')`)
	// The refusal is an expected answer, not a page error; the browser still
	// logs the failed request, so only script errors are looked at here.
	for _, p := range tb.problems() {
		require.Contains(t, p, "409", "console:\n%s", tb.consoleText())
	}
}

// TestQueuesPageShowsMore lists more queues than one page of the queues
// view holds: the first 100 by name, the count of all, and a button that
// reads the next ones.
func TestQueuesPageShowsMore(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	const extra = 105
	var wg sync.WaitGroup
	for w := range 5 {
		wg.Go(func() {
			for i := w; i < extra; i += 5 {
				code := b.call(t, http.MethodPut, fmt.Sprintf("/api/v1/queues/q%03d", i), "", nil)
				require.Equal(t, http.StatusCreated, code)
			}
		})
	}
	wg.Wait()
	var first struct {
		Totals struct {
			Queues int `json:"queues"`
		} `json:"totals"`
	}
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/api/v1/queues?limit=1", "", &first))
	total := first.Totals.Queues
	require.GreaterOrEqual(t, total, extra)

	tb := newTab(t, b)
	tb.open("/queues")
	tb.waitPage("queues")
	rows := `document.querySelectorAll('#queues-table tbody tr[data-queue]').length`
	tb.waitFor(rows + ` === 100`)
	require.Equal(t, fmt.Sprintf("Showing 100 of %d queues, by name.", total), eval[string](tb, `document.querySelector('#queues-count').textContent`))
	require.False(t, eval[bool](tb, `document.querySelector('#queues-more').hidden`))
	require.Equal(t, "q000", eval[string](tb, `document.querySelector('#queues-table tbody tr[data-queue]').dataset.queue`))

	tb.click(`#queues-more`)
	tb.waitFor(fmt.Sprintf(`%s === %d`, rows, total))
	tb.waitFor(`document.querySelector('#queues-more').hidden`)
	require.Empty(t, eval[string](tb, `document.querySelector('#queues-count').textContent`))

	// The overview's cards count every queue, its table the first ones.
	tb.goTo("/")
	tb.waitPage("overview")
	tb.waitFor(fmt.Sprintf(`document.querySelector('#ov-queues-more').textContent === 'All %d queues →'`, total))
	require.Equal(t, 20, eval[int](tb, `document.querySelectorAll('#ov-queues tbody tr[data-queue]').length`))
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestQueuesPageShowsLimits: a queue's flow-control limits appear in its
// row, and go when they are removed.
func TestQueuesPageShowsLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.waitStatus(t, b.submit(t, `{"task_type": "echo", "queue": "default"}`).TaskID, "succeeded")
	require.Equal(t, http.StatusOK, b.call(t, http.MethodPut, "/api/v1/queues/default/limits",
		`{"rate": {"limit": 10, "period": "1s"}, "concurrency": 5, "key_concurrency": 1}`, nil))
	tb := newTab(t, b)
	tb.open("/queues")
	tb.waitPage("queues")
	cell := `document.querySelector('#queues-table tr[data-queue="default"] td.cell-limits')?.textContent`
	tb.waitFor(cell + ` === '10/1s · 5 running · 1 per key'`)
	require.Equal(t, http.StatusOK, b.call(t, http.MethodDelete, "/api/v1/queues/default/limits", "", nil))
	// No event tells the page of a limits change: its idle refresh (at
	// most 20 s after its last load) shows it.
	tb.waitForWithin(cell+` === ''`, 45*time.Second)
}
