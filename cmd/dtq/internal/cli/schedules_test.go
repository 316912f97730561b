package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSchedules(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	out := b.ok(t, "schedules", "put", "weekday-report", "--spec", "0 9 * * 1-5", "--timezone", "Europe/Paris",
		"--type", "report", "--queue", "reports", "--payload", `{"kind":"daily"}`, "--priority", "7")
	require.Regexp(t, `^schedule weekday-report created; next run \d{4}-\d\d-\d\dT0[78]:00:00\.000Z\n$`, out)
	out = b.ok(t, "schedules", "put", "weekday-report", "--spec", "0 9 * * 1-5", "--timezone", "Europe/Paris",
		"--type", "report", "--queue", "reports", "--payload", `{"kind":"daily"}`, "--priority", "7")
	require.Contains(t, out, "schedule weekday-report replaced;")
	b.ok(t, "schedules", "put", "heartbeat", "--spec", "@every 1h", "--type", "echo")

	require.Equal(t, "schedule heartbeat paused\n", b.ok(t, "schedules", "pause", "heartbeat"))
	require.Equal(t, "schedule heartbeat was already paused\n", b.ok(t, "schedules", "pause", "heartbeat"))
	golden(t, "schedules_list", b.ok(t, "schedules", "list"))
	golden(t, "schedules_get", b.ok(t, "schedules", "get", "weekday-report"))

	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "schedules", "list", "--queue", "reports", "-o", "json")), &items))
	require.Len(t, items, 1)
	require.Equal(t, "weekday-report", items[0]["name"])

	out = b.ok(t, "schedules", "trigger", "heartbeat")
	require.Regexp(t, `^schedule heartbeat triggered: task [0-9a-f]{32} queued on default\n$`, out)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "schedules", "get", "heartbeat", "-o", "json")), &got))
	require.NotNil(t, got["last_task_id"])
	require.Regexp(t, `^schedule heartbeat resumed; next run \S+Z\n$`, b.ok(t, "schedules", "resume", "heartbeat"))

	require.Equal(t, "deleted schedule heartbeat\n", b.ok(t, "schedules", "delete", "heartbeat"))
	code, stdout, stderr := b.run(t, "schedules", "get", "heartbeat")
	requireAPIError(t, code, stdout, stderr, "SCHEDULE_NOT_FOUND")
	code, stdout, stderr = b.run(t, "schedules", "put", "bad", "--spec", "0 25 * * *", "--type", "echo")
	requireAPIError(t, code, stdout, stderr, "INVALID_REQUEST")
	require.Contains(t, stderr, "spec:")
	code, _, stderr = b.run(t, "schedules", "put", "bad", "--spec", "@daily", "--type", "echo", "--payload", "{")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--payload")

	items2, err := b.admin.ListSchedules(b.ctx, nil)
	require.NoError(t, err)
	require.Len(t, items2.Items, 1)
}
