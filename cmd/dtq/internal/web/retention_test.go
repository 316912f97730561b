package web_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// notKept is what the task page shows for the payload and the metadata of
// a succeeded task that did not keep them.
const notKept = "Not kept (succeeded; submit with keep_payload to keep it)"

// queueList is the part of the first page of GET /api/v1/queues the
// retention tests look at.
type queueList struct {
	Items []struct {
		Queue    string           `json:"queue"`
		Retained map[string]int64 `json:"retained"`
	} `json:"items"`
	Totals struct {
		Retained int64 `json:"retained"`
	} `json:"totals"`
	RedisMemory *struct {
		UsedBytes int64 `json:"used_bytes"`
		MaxBytes  int64 `json:"max_bytes"`
	} `json:"redis_memory"`
}

func (b *bundle) queueList(t *testing.T) queueList {
	t.Helper()
	var l queueList
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/api/v1/queues", "", &l))
	return l
}

// finishSome leaves three finished tasks kept in queue default (two
// succeeded, one cancelled) and one pending task in queue emails, and
// waits until the API counts them.
func (b *bundle) finishSome(t *testing.T) {
	t.Helper()
	for range 2 {
		b.waitStatus(t, b.submit(t, `{"task_type": "echo"}`).TaskID, "succeeded")
	}
	later := b.submit(t, `{"task_type": "echo", "delay_ms": 3600000}`)
	require.Equal(t, http.StatusAccepted, b.call(t, http.MethodPost, "/api/v1/tasks/"+later.TaskID+"/cancel", "", nil))
	b.waitStatus(t, later.TaskID, "cancelled")
	b.submit(t, `{"task_type": "echo", "queue": "emails", "delay_ms": 3600000}`)
	require.Eventually(t, func() bool { return b.queueList(t).Totals.Retained == 3 },
		actionTimeout, 25*time.Millisecond, "the API never counted the three finished tasks as kept")
}

// TestOverviewShowsMemoryAndKept: the overview's cards show how much memory
// Redis uses (the test server sets no maxmemory, which the card says) and
// how many finished tasks are kept.
func TestOverviewShowsMemoryAndKept(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.finishSome(t)
	mem := b.queueList(t).RedisMemory
	require.NotNil(t, mem, "the test Redis reports no memory")
	require.Zero(t, mem.MaxBytes, "the test Redis has a maxmemory")

	tb := newTab(t, b)
	tb.open("/")
	tb.waitPage("overview")
	tb.waitFor(`document.querySelector('#ov-kept').dataset.value === '3'`)
	require.Equal(t, "3", eval[string](tb, `document.querySelector('#ov-kept').textContent`))
	require.Contains(t, eval[string](tb, `document.querySelector('#ov-kept').closest('.stat').textContent`), "Finished, kept")

	card := `document.querySelector('#ov-memory').closest('.stat')`
	tb.waitFor(`!` + card + `.hidden`)
	require.Regexp(t, `^\d+(\.\d)? (B|KB|MB|GB)$`, eval[string](tb, `document.querySelector('#ov-memory').textContent`))
	require.Positive(t, eval[float64](tb, `Number(document.querySelector('#ov-memory').dataset.value)`))
	require.Equal(t, "no maxmemory set", eval[string](tb, card+`.querySelector('.stat-sub').textContent`))
	require.Contains(t, eval[string](tb, card+`.textContent`), "Redis memory")
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestQueuesPageShowsKept: the Kept column counts a queue's finished tasks
// that are kept, with the count of each status in its tooltip; a queue
// with only a pending task keeps none.
func TestQueuesPageShowsKept(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	b.finishSome(t)

	tb := newTab(t, b)
	tb.open("/queues")
	tb.waitPage("queues")
	cell := func(q string) string {
		return fmt.Sprintf(`document.querySelector('#queues-table tr[data-queue=%q] td.cell-kept')`, q)
	}
	tb.waitFor(cell("default") + `?.textContent === '3'`)
	require.Equal(t, "Finished tasks kept until their retention ends:\n2 succeeded\n1 cancelled",
		eval[string](tb, cell("default")+`.title`))
	tb.waitFor(cell("emails") + `?.textContent === '0'`)
	require.Equal(t, "No finished tasks kept.", eval[string](tb, cell("emails")+`.title`))
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestTaskPageSaysPayloadNotKept: a succeeded task that did not keep its
// payload and metadata says so in their place; one submitted with
// keep_payload shows them, and its retention.
func TestTaskPageSaysPayloadNotKept(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	dropped := b.submit(t, `{"task_type": "echo", "payload": {"hello": "world"}, "metadata": {"source": "test"}}`)
	kept := b.submit(t, `{"task_type": "echo", "payload": {"hello": "kept"}, "metadata": {"source": "test"},
		"keep_payload": true, "retention_seconds": 7200}`)
	b.waitStatus(t, dropped.TaskID, "succeeded")
	b.waitStatus(t, kept.TaskID, "succeeded")
	var answer struct {
		PayloadDropped bool `json:"payload_dropped"`
	}
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/api/v1/tasks/"+dropped.TaskID, "", &answer))
	require.True(t, answer.PayloadDropped)

	tb := newTab(t, b)
	shown := func(id string) {
		t.Helper()
		tb.open("/tasks/" + id)
		tb.waitPage("task")
		tb.waitFor(fmt.Sprintf(`document.querySelector('.task-id')?.textContent === %q && document.querySelector('#task-status')?.dataset.status === 'succeeded'`, id))
	}
	shown(dropped.TaskID)
	require.Equal(t, notKept, eval[string](tb, `document.querySelector('#task-payload').textContent`))
	require.Contains(t, eval[string](tb, `document.querySelector('#task-metadata').textContent`), `"source": "test"`, "metadata is kept")
	require.False(t, eval[bool](tb, `!!document.querySelector('#task-retention')`))

	shown(kept.TaskID)
	require.Contains(t, eval[string](tb, `document.querySelector('#task-payload').textContent`), `"hello": "kept"`)
	require.Contains(t, eval[string](tb, `document.querySelector('#task-metadata').textContent`), `"source": "test"`)
	require.Equal(t, "2 h 0 min once finished · payload kept", eval[string](tb, `document.querySelector('#task-retention').textContent`))
	require.NotContains(t, eval[string](tb, `document.querySelector('main').textContent`), "Not kept")
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}
