package web_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTaskProgressAndLogPanel: a sleep's progress shows as a bar on the
// task page and in the task list, and its log lines in the log panel,
// followed while it runs.
func TestTaskProgressAndLogPanel(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	task := b.submit(t, `{"task_type": "sleep", "payload": {"seconds": 1.5}}`)

	tb := newTab(t, b)
	tb.open("/tasks/" + task.TaskID)
	tb.waitPage("task")
	// The first line appears while the task runs; the last once it is done.
	tb.waitFor(`document.querySelector('#task-logs')?.textContent.includes('msg=sleeping seconds=1.5')`)
	tb.waitFor(fmt.Sprintf(`document.querySelector('#task-status')?.dataset.status === 'succeeded' && document.querySelector('.task-id')?.textContent === %q`, task.TaskID))
	tb.waitFor(`document.querySelector('#task-logs')?.textContent.includes('msg=slept seconds=1.5')`)
	tb.waitFor(`document.querySelector('#task-progress progress')?.value === 100`)
	require.Equal(t, 2, eval[int](tb, `document.querySelectorAll('#task-logs .log-line').length`))
	require.Equal(t, "100%", eval[string](tb, `document.querySelector('#task-progress .progress-text').textContent`))

	tb.open("/tasks")
	tb.waitPage("tasks")
	tb.waitFor(fmt.Sprintf(`document.querySelector('tr[data-task-id=%q] .cell-progress progress')?.value === 100`, task.TaskID))
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}
