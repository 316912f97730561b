package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
)

// TestPagesLoadWithoutConsoleErrors visits every page with some state to
// show and checks that nothing is written to the console: no exception, no
// failed request, no Content-Security-Policy violation.
func TestPagesLoadWithoutConsoleErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	// keep_payload: a succeeded task keeps its payload only when asked.
	done := b.submit(t, `{"task_type": "echo", "payload": {"hello": "world"}, "metadata": {"source": "test"}, "keep_payload": true}`)
	dead := b.submit(t, `{"task_type": "always_fail", "queue": "emails", "max_attempts": 1}`)
	wf := b.submitWorkflow(t, "pages", []wfNode{{Ref: "a", TaskType: "echo"}, {Ref: "b", TaskType: "echo", Deps: []string{"a"}}})
	b.waitStatus(t, done.TaskID, "succeeded")
	b.waitStatus(t, dead.TaskID, "dead_lettered")
	b.waitWorkflow(t, wf.WorkflowID, "succeeded")

	tb := newTab(t, b)
	tb.open("/")
	tb.waitPage("overview")
	tb.waitFor(`document.querySelector('#ov-redis').textContent === 'Ready'`)
	for _, p := range []struct{ route, page string }{
		{"/tasks", "tasks"},
		{"/tasks/" + done.TaskID, "task"},
		{"/tasks/" + dead.TaskID, "task"},
		{"/queues", "queues"},
		{"/dlq", "dlq"},
		{"/workers", "workers"},
		{"/workflows", "workflows"},
		{"/workflows/" + wf.WorkflowID, "workflow"},
		{"/tasks/" + wf.taskOf(t, "b"), "task"},
		{"/events", "events"},
		{"/", "overview"},
	} {
		tb.goTo(p.route)
		tb.waitPage(p.page)
	}
	// A fresh load of a deep link works too.
	tb.open("/tasks/" + done.TaskID)
	tb.waitPage("task")
	tb.waitFor(`document.querySelector('#task-status')?.dataset.status === 'succeeded'`)
	require.Contains(t, eval[string](tb, `document.querySelector('#task-payload').textContent`), `"hello": "world"`)
	tb.waitFor(`document.querySelector('#conn').dataset.state === 'live'`)

	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestLiveUpdates submits tasks through the API while the overview and the
// task list are open, and checks that both follow without a reload.
func TestLiveUpdates(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	tb := newTab(t, b)
	tb.open("/")
	tb.waitPage("overview")
	tb.waitFor(`document.querySelector('#conn').dataset.state === 'live'`)
	require.Equal(t, "0", eval[string](tb, `document.querySelector('#ov-succeeded').dataset.value`))
	tb.do(evalVoid(`window.__sameDocument = true`))

	for i := range 5 {
		b.submit(t, fmt.Sprintf(`{"task_type": "echo", "payload": {"n": %d}}`, i))
	}
	tb.waitFor(`Number(document.querySelector('#ov-succeeded').dataset.value) >= 5`)
	tb.waitFor(`document.querySelector('#ov-queues tr[data-queue="default"]')`)
	require.True(t, eval[bool](tb, `window.__sameDocument === true`), "the overview reloaded the page")

	tb.goTo("/tasks")
	tb.waitPage("tasks")
	require.Equal(t, 5, eval[int](tb, `document.querySelectorAll('#tasks-table tbody tr[data-task-id]').length`))
	tk := b.submit(t, `{"task_type": "sleep", "payload": {"seconds": 0.3}}`)
	row := fmt.Sprintf(`#tasks-table tbody tr[data-task-id=%q]`, tk.TaskID)
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')`, row))
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')?.dataset.status === 'succeeded'`, row))
	// The newest task is on top.
	require.Equal(t, tk.TaskID, eval[string](tb, `document.querySelector('#tasks-table tbody tr').dataset.taskId`))
	require.True(t, eval[bool](tb, `window.__sameDocument === true`), "the task list reloaded the page")

	// A filter on another queue hides it, and new tasks there appear live.
	tb.goTo("/tasks?queue=emails")
	tb.waitPage("tasks")
	tb.waitFor(`document.querySelector('#tasks-table tr.empty')`)
	other := b.submit(t, `{"task_type": "echo", "queue": "emails"}`)
	tb.waitFor(fmt.Sprintf(`document.querySelector('#tasks-table tbody tr[data-task-id=%q]')`, other.TaskID))
	require.Equal(t, 1, eval[int](tb, `document.querySelectorAll('#tasks-table tbody tr[data-task-id]').length`))
}

// TestDLQRequeueByClick dead-letters a task and requeues it from the dead
// letters page.
func TestDLQRequeueByClick(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	dead := b.submit(t, `{"task_type": "always_fail", "max_attempts": 1, "payload": {"why": "testing"}}`)
	b.waitStatus(t, dead.TaskID, "dead_lettered")

	tb := newTab(t, b)
	tb.open("/dlq")
	tb.waitPage("dlq")
	entry := fmt.Sprintf(`#dlq-list article[data-task-id=%q]`, dead.TaskID)
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')`, entry))
	require.Contains(t, eval[string](tb, fmt.Sprintf(`document.querySelector('%s .dlq-error').textContent`, entry)),
		"always_fail failed on attempt 1")

	tb.click(entry + ` button[data-action="requeue"]`)
	// always_fail fails again at once, so the task comes back to the DLQ;
	// the requeue shows in previous_attempts.
	require.Eventually(t, func() bool { return b.task(t, dead.TaskID).PreviousAttempts == 1 },
		actionTimeout, 25*time.Millisecond)
	b.waitStatus(t, dead.TaskID, "dead_lettered")
	tb.waitFor(`[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('Requeued'))`)
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestPauseQueueByClick pauses a queue from the queues page, confirming in
// the dialog, then resumes it.
func TestPauseQueueByClick(t *testing.T) {
	t.Parallel()
	b, tb := queuesPage(t)
	row := `#queues-table tr[data-queue="default"]`
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')?.dataset.paused === 'false'`, row))

	tb.click(row + ` button[data-action="pause"]`)
	tb.waitFor(`document.querySelector('#confirm').open`)
	require.Contains(t, eval[string](tb, `document.querySelector('#confirm-title').textContent`), "Pause queue default")
	// Cancelling changes nothing.
	tb.click(`#confirm-cancel`)
	tb.waitFor(`!document.querySelector('#confirm').open`)
	require.False(t, b.queuePaused(t, "default"))

	tb.click(row + ` button[data-action="pause"]`)
	tb.waitFor(`document.querySelector('#confirm').open`)
	tb.click(`#confirm-ok`)
	b.waitPaused(t, tb)
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')?.dataset.paused === 'true'`, row))

	// Paused: a new task waits.
	waiting := b.submit(t, `{"task_type": "echo"}`)
	require.Equal(t, "queued", b.task(t, waiting.TaskID).Status)

	tb.click(row + ` button[data-action="resume"]`)
	tb.waitFor(`document.querySelector('#confirm').open`)
	tb.click(`#confirm-ok`)
	b.waitStatus(t, waiting.TaskID, "succeeded")
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')?.dataset.paused === 'false'`, row))
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestConfirmAskedAgainBeforeTheCloseEvent: a dialog closes at once but
// fires its close event later, as a task. A question asked again before the
// previous one's close event arrived took that event for its own answer
// ("no"), so the confirmation that followed did nothing. Here the cancel
// and the second question happen in one script, before the event.
func TestConfirmAskedAgainBeforeTheCloseEvent(t *testing.T) {
	t.Parallel()
	b, tb := queuesPage(t)
	pause := `#queues-table tr[data-queue="default"] button[data-action="pause"]`
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')`, pause))
	tb.do(evalVoid(fmt.Sprintf(`(() => {
		document.querySelector('%[1]s').click();
		document.querySelector('#confirm-cancel').click();
		document.querySelector('%[1]s').click();
	})()`, pause)))
	tb.waitFor(`document.querySelector('#confirm').open`)
	tb.click(`#confirm-ok`)
	b.waitPaused(t, tb)
}

// queuesPage runs a task on queue default and opens the queues page.
func queuesPage(t *testing.T) (*bundle, *tab) {
	t.Helper()
	b := setup(t, options{})
	b.waitStatus(t, b.submit(t, `{"task_type": "echo"}`).TaskID, "succeeded")
	tb := newTab(t, b)
	tb.open("/queues")
	tb.waitPage("queues")
	return b, tb
}

// waitPaused waits until queue default is paused; when it never is, the
// failure shows the page's state, the audit log (did the pause reach the
// server?) and the console.
func (b *bundle) waitPaused(t *testing.T, tb *tab) {
	t.Helper()
	if !assert.Eventually(t, func() bool { return b.queuePaused(t, "default") }, actionTimeout, 25*time.Millisecond) {
		var audit map[string]any
		b.call(t, http.MethodGet, "/api/v1/audit", "", &audit)
		t.Fatalf("the queue was not paused\npage: %s\naudit: %v\nconsole:\n%s", tb.pageState(), audit, tb.consoleText())
	}
}

func (b *bundle) queuePaused(t *testing.T, q string) bool {
	t.Helper()
	var qi struct {
		Paused bool `json:"paused"`
	}
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/api/v1/queues/"+q, "", &qi))
	return qi.Paused
}

// adminControls counts the enabled buttons of admin actions on the page.
const adminControls = `document.querySelectorAll('button[data-admin]:not([disabled]):not([hidden])').length`

// TestReaderKeyCannotAct signs in with a reader key and checks that no page
// offers an enabled admin action, while an admin key gets them.
func TestReaderKeyCannotAct(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: true})
	dead := b.submit(t, `{"task_type": "always_fail", "max_attempts": 1}`)
	b.waitStatus(t, dead.TaskID, "dead_lettered")
	pending := b.submit(t, `{"task_type": "echo", "delay_ms": 3600000}`)
	held := b.submitWorkflow(t, "held", []wfNode{{Ref: "a", TaskType: "echo", DelayMS: 3600000}})

	tb := newTab(t, b)
	tb.open("/")
	tb.signIn("not-a-key")
	tb.waitFor(`document.querySelector('#signin-error').textContent.includes('not accepted')`)
	tb.do(evalVoid(`document.querySelector('#signin-key').value = ''`))
	tb.signIn(readerKey)
	tb.waitPage("overview")
	require.Equal(t, "reader", eval[string](tb, `document.querySelector('#role').dataset.role`))
	require.Equal(t, readerKey, eval[string](tb, `sessionStorage.getItem('dtq.apiKey')`))
	tb.waitFor(`document.querySelector('#conn').dataset.state === 'live'`)

	pages := []struct{ route, page, ready string }{
		{"/queues", "queues", `document.querySelector('#queues-table tr[data-queue="default"]')`},
		{"/dlq", "dlq", fmt.Sprintf(`document.querySelector('#dlq-list article[data-task-id=%q]')`, dead.TaskID)},
		{"/tasks/" + pending.TaskID, "task", `document.querySelector('#task-status')?.dataset.status === 'pending'`},
		{"/workflows/" + held.WorkflowID, "workflow", `document.querySelector('#wf-status')?.dataset.status === 'running'`},
	}
	for _, p := range pages {
		tb.goTo(p.route)
		tb.waitPage(p.page)
		tb.waitFor(p.ready)
		require.Zero(t, eval[int](tb, adminControls), "reader sees admin controls on %s", p.route)
		require.True(t, eval[bool](tb, `!!document.querySelector('#read-only-note')`), p.route)
	}

	// The same pages offer the actions to an admin key.
	tb.click("#signout")
	tb.signIn(adminKey)
	tb.waitPage("workflow") // back where the reader left
	require.Equal(t, "admin", eval[string](tb, `document.querySelector('#role').dataset.role`))
	for _, p := range pages {
		tb.goTo(p.route)
		tb.waitPage(p.page)
		tb.waitFor(p.ready)
		require.NotZero(t, eval[int](tb, adminControls), "admin sees no admin controls on %s", p.route)
	}
}

// TestSignInAndOut checks the key is kept for the tab and forgotten on
// sign-out.
func TestSignInAndOut(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: true})
	tb := newTab(t, b)
	tb.open("/workers")
	tb.signIn(adminKey)
	tb.waitPage("workers")
	tb.waitFor(fmt.Sprintf(`document.querySelector('#workers-table tr[data-worker-id=%q]')?.dataset.live === 'true'`, "worker-"+b.prefix))

	// A reload keeps the session.
	tb.open("/workers")
	tb.waitPage("workers")
	tb.click("#signout")
	tb.waitPage("signin")
	require.Empty(t, eval[string](tb, `sessionStorage.getItem('dtq.apiKey') || ''`))
	require.True(t, strings.Contains(eval[string](tb, `document.querySelector('#signin-error').textContent`), "Signed out"))
}

// TestDLQBulkRequeue requeues every dead letter matching a filter, after a
// confirmation that shows how many match.
func TestDLQBulkRequeue(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var ids []string
	for range 3 {
		ids = append(ids, b.submit(t, `{"task_type": "always_fail", "queue": "emails", "max_attempts": 1}`).TaskID)
	}
	other := b.submit(t, `{"task_type": "always_fail", "max_attempts": 1}`)
	for _, id := range append(ids, other.TaskID) {
		b.waitStatus(t, id, "dead_lettered")
	}

	tb := newTab(t, b)
	tb.open("/dlq?queue=emails")
	tb.waitPage("dlq")
	tb.waitFor(`document.querySelectorAll('#dlq-list article').length === 3`)
	tb.click("#dlq-requeue-all")
	tb.waitFor(`document.querySelector('#confirm').open`)
	require.Equal(t, "3", eval[string](tb, `document.querySelector('#bulk-count').dataset.count`))
	require.Contains(t, eval[string](tb, `document.querySelector('#confirm-body').textContent`), "queue emails")
	tb.click("#confirm-ok")
	for _, id := range ids {
		require.Eventually(t, func() bool { return b.task(t, id).PreviousAttempts == 1 }, actionTimeout, 25*time.Millisecond)
	}
	require.Zero(t, b.task(t, other.TaskID).PreviousAttempts, "a task outside the filter was requeued")
	tb.waitFor(`[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('Requeued 3'))`)
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestCancelTaskByClick cancels a delayed task from its page, which also
// shows the events from before the page was opened.
func TestCancelTaskByClick(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	tk := b.submit(t, `{"task_type": "echo", "delay_ms": 3600000}`)
	tb := newTab(t, b)
	tb.open("/tasks/" + tk.TaskID)
	tb.waitPage("task")
	tb.waitFor(`document.querySelector('#task-status')?.dataset.status === 'pending'`)
	tb.waitFor(`[...document.querySelectorAll('#task-events tr[data-event-id] .badge')].some(e => e.textContent === 'TASK_PENDING')`)
	tb.click("#task-cancel")
	tb.waitFor(`document.querySelector('#confirm').open`)
	tb.click("#confirm-ok")
	b.waitStatus(t, tk.TaskID, "cancelled")
	tb.waitFor(`document.querySelector('#task-status')?.dataset.status === 'cancelled'`)
	tb.waitFor(`!document.querySelector('#task-cancel')`)
	tb.waitFor(`document.querySelector('#task-events tr[data-event-id] .badge')?.textContent === 'TASK_CANCELLED'`)
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestFeedResumesAndResets cuts the event feed under the dashboard: it
// resumes from its cursor without losing or repeating events, and when its
// position was trimmed away it says so and reloads.
func TestFeedResumesAndResets(t *testing.T) {
	t.Parallel()
	gate := newFeedGate()
	b := setup(t, options{gate: gate, ringSize: 4})
	tb := newTab(t, b)
	tb.open("/events?queue=default")
	tb.waitPage("events")
	tb.waitFor(`document.querySelector('#conn').dataset.state === 'live'`)
	rowsOf := func(id, typ string) string {
		return fmt.Sprintf(`document.querySelectorAll('#events-table tr[data-type=%q] a[title=%q]').length`, typ, id)
	}
	first := b.submit(t, `{"task_type": "echo"}`)
	tb.waitFor(rowsOf(first.TaskID, "TASK_SUCCEEDED") + ` === 1`)

	// An outage: what happens meanwhile arrives after the reconnect, once.
	gate.hold()
	tb.waitFor(`document.querySelector('#conn').dataset.state !== 'live'`)
	during := b.submit(t, `{"task_type": "echo"}`)
	b.waitStatus(t, during.TaskID, "succeeded")
	gate.release()
	tb.waitFor(rowsOf(during.TaskID, "TASK_SUCCEEDED") + ` === 1`)
	tb.waitFor(`document.querySelector('#conn').dataset.state === 'live'`)
	require.NotZero(t, gate.resumes(), "the reconnect sent no Last-Event-ID")
	require.Equal(t, 1, eval[int](tb, rowsOf(during.TaskID, "TASK_QUEUED")))
	require.True(t, eval[bool](tb, `(() => {
		const ids = [...document.querySelectorAll('#events-table tr[data-event-id]')].map(r => r.dataset.eventId);
		return ids.length > 0 && new Set(ids).size === ids.length;
	})()`), "an event was shown twice")

	// An outage longer than the retained events: the feed resets.
	gate.hold()
	tb.waitFor(`document.querySelector('#conn').dataset.state !== 'live'`)
	for range 3 {
		b.waitStatus(t, b.submit(t, `{"task_type": "echo"}`).TaskID, "succeeded")
	}
	require.NoError(t, b.rc.XTrimMaxLen(context.Background(), rdb.NewKeys(b.prefix).Events("default"), 0).Err())
	gate.release()
	tb.waitFor(`[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('trimmed'))`)
	tb.waitFor(`document.querySelector('#conn').dataset.state === 'live'`)
	after := b.submit(t, `{"task_type": "echo"}`)
	tb.waitFor(rowsOf(after.TaskID, "TASK_SUCCEEDED") + ` === 1`)
}

// TestWorkersPageShowsHTTPWorkers lists a worker that claims over HTTP
// with its kind, last claim and the task it holds.
func TestWorkersPageShowsHTTPWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, options{queues: map[string]int{"default": 1}})
	tk := b.submit(t, `{"task_type": "resize", "queue": "remote"}`)
	var claimed struct {
		Tasks []struct {
			TaskID string `json:"task_id"`
		} `json:"tasks"`
	}
	require.Equal(t, http.StatusOK, b.call(t, http.MethodPost, "/api/v1/claims",
		`{"worker_id": "py-dash", "queues": ["remote"], "lease": "1m"}`, &claimed))
	require.Len(t, claimed.Tasks, 1)
	require.Equal(t, tk.TaskID, claimed.Tasks[0].TaskID)

	tb := newTab(t, b)
	tb.open("/workers")
	tb.waitPage("workers")
	row := `document.querySelector('#workers-table tr[data-worker-id="py-dash"]')`
	tb.waitFor(row + `?.dataset.kind === 'http'`)
	require.Contains(t, eval[string](tb, row+`.textContent`), "HTTP worker · last claim")
	require.Contains(t, eval[string](tb, row+`.querySelector('.cell-running').textContent`), tk.TaskID[16:28])
	require.Equal(t, "true", eval[string](tb, row+`.dataset.live`))
}

// TestFiltersFollowTheURL moves between filters of the list pages as a link
// would, without a reload, and checks that the filter controls show them.
// The first route of each page mounts it; the second changes its filter in
// place (a queue select shows only queues it lists, so the second clears the
// queue rather than naming one the test never created).
func TestFiltersFollowTheURL(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	tb := newTab(t, b)
	tb.open("/")
	tb.waitPage("overview")
	tests := []struct {
		page, route string
		want        map[string]string // control id -> value shown
	}{
		{"tasks", "/tasks?queue=emails&status=queued&type=send",
			map[string]string{"tasks-queue": "emails", "tasks-status": "queued", "tasks-type": "send"}},
		{"tasks", "/tasks?status=running", map[string]string{"tasks-queue": "", "tasks-status": "running", "tasks-type": ""}},
		{"dlq", "/dlq?queue=emails&type=send&error_class=Timeout",
			map[string]string{"dlq-queue": "emails", "dlq-type": "send", "dlq-class": "Timeout"}},
		{"dlq", "/dlq?type=other", map[string]string{"dlq-queue": "", "dlq-type": "other", "dlq-class": ""}},
		{"workflows", "/workflows?status=failed&name=nightly", map[string]string{"workflows-status": "failed", "workflows-name": "nightly"}},
		{"workflows", "/workflows?name=other", map[string]string{"workflows-status": "", "workflows-name": "other"}},
		{"events", "/events?queue=emails", map[string]string{"events-queue": "emails", "events-type": "", "events-task": ""}},
		{"events", "/events?type=TASK_QUEUED&task_id=abc",
			map[string]string{"events-queue": "", "events-type": "TASK_QUEUED", "events-task": "abc"}},
	}
	for _, tt := range tests {
		tb.goTo(tt.route)
		tb.waitPage(tt.page)
		for id, want := range tt.want {
			tb.waitFor(fmt.Sprintf(`document.getElementById(%q)?.value === %q`, id, want))
		}
	}
	require.Equal(t, b.url+"/#/events?type=TASK_QUEUED&task_id=abc", eval[string](tb, `location.href`))
}
