package web_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// scheduleState is the part of a schedule answer the test looks at.
type scheduleState struct {
	Paused     bool    `json:"paused"`
	LastTaskID *string `json:"last_task_id"`
}

func (b *bundle) schedule(t *testing.T, name string) scheduleState {
	t.Helper()
	var s scheduleState
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/api/v1/schedules/"+name, "", &s))
	return s
}

// TestSchedulesPage shows a schedule, pauses it and triggers it by click.
func TestSchedulesPage(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	require.Equal(t, http.StatusCreated, b.call(t, http.MethodPut, "/api/v1/schedules/hourly-echo",
		`{"spec":"0 * * * *","timezone":"Europe/Paris","task_type":"echo","payload":{"from":"schedule"}}`, nil))

	tb := newTab(t, b)
	tb.open("/schedules")
	tb.waitPage("schedules")
	row := `#schedules-table tr[data-schedule="hourly-echo"]`
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')?.dataset.paused === 'false'`, row))
	require.Contains(t, eval[string](tb, fmt.Sprintf(`document.querySelector('%s').textContent`, row)), "Europe/Paris")

	tb.click(row + ` button[data-action="pause"]`)
	tb.waitFor(`document.querySelector('#confirm').open`)
	require.Contains(t, eval[string](tb, `document.querySelector('#confirm-title').textContent`), "Pause schedule hourly-echo")
	tb.click(`#confirm-ok`)
	require.Eventually(t, func() bool { return b.schedule(t, "hourly-echo").Paused }, actionTimeout, 25*time.Millisecond)
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')?.dataset.paused === 'true'`, row))

	// Trigger works while paused; the task runs and shows as the last task.
	tb.click(row + ` button[data-action="trigger"]`)
	tb.waitFor(`document.querySelector('#confirm').open`)
	tb.click(`#confirm-ok`)
	require.Eventually(t, func() bool { return b.schedule(t, "hourly-echo").LastTaskID != nil }, actionTimeout, 25*time.Millisecond)
	id := *b.schedule(t, "hourly-echo").LastTaskID
	b.waitStatus(t, id, "succeeded")
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s .cell-last-task a')?.getAttribute('href') === '#/tasks/%s'`, row, id))

	tb.click(row + ` button[data-action="resume"]`)
	tb.waitFor(`document.querySelector('#confirm').open`)
	tb.click(`#confirm-ok`)
	tb.waitFor(fmt.Sprintf(`document.querySelector('%s')?.dataset.paused === 'false'`, row))
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}
