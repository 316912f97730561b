package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/cursor"
)

type auditListJSON struct {
	Items      []dtqtype.AuditEntry `json:"items"`
	NextCursor *string              `json:"next_cursor"`
}

// audit reads the whole audit log, newest first.
func (b *bundle) audit(t *testing.T, hdr ...string) []dtqtype.AuditEntry {
	t.Helper()
	res := b.do(t, http.MethodGet, "/api/v1/audit?limit=1000", "", hdr...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var l auditListJSON
	res.decode(t, &l)
	require.Nil(t, l.NextCursor)
	return l.Items
}

// logLines returns the JSON log records whose msg is msg.
func (b *bundle) logLines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.logs.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func TestAuditEveryAction(t *testing.T) {
	t.Parallel()
	keys, err := ParseAPIKeys("admin:night-shift:adm-1,reader:dash:rd-1")
	require.NoError(t, err)
	b := setup(t, options{keys: keys})
	b.startWorker(t, map[string]int{"dlq": 1}, handlers{
		"doomed": func(ctx context.Context, task *dtq.Task) (any, error) { return nil, dtq.Permanent(errors.New("no")) },
	})
	admin := []string{"Authorization", "Bearer adm-1"}
	dead := func() string {
		id := b.submit(t, dtq.Submission{Type: "doomed", Queue: "dlq"})
		b.waitStatus(t, id, dtqtype.StatusDeadLettered)
		return id
	}
	queued := b.submit(t, dtq.Submission{Type: "echo", Queue: "idle"})
	later := b.submit(t, dtq.Submission{Type: "echo", Queue: "idle", Delay: time.Hour})
	requeue, discard := dead(), dead()

	type step struct {
		method, path, body string
		status             int
		action, target     string
	}
	steps := []step{
		{http.MethodPost, "/api/v1/tasks/" + queued + "/cancel", `{"reason":"dup"}`, 202, "task.cancel", queued},
		{http.MethodPost, "/api/v1/tasks/" + later + "/run-now", "", 200, "task.run_now", later},
		{http.MethodDelete, "/api/v1/tasks/" + queued, "", 204, "task.delete", queued},
		{http.MethodPost, "/api/v1/queues/idle/pause", "", 200, "queue.pause", "idle"},
		{http.MethodPost, "/api/v1/queues/idle/resume", "", 200, "queue.resume", "idle"},
		{http.MethodPost, "/api/v1/queues/idle/purge", "", 200, "queue.purge", "idle"},
		{http.MethodPost, "/api/v1/queues/idle/recount", "", 200, "queue.recount", "idle"},
		{http.MethodPost, "/api/v1/dlq/" + requeue + "/requeue", "", 200, "dlq.requeue", requeue},
		{http.MethodPost, "/api/v1/dlq/" + discard + "/discard", "", 200, "dlq.discard", discard},
		{http.MethodPost, "/api/v1/dlq/requeue?queue=dlq&type=none", "", 200, "dlq.requeue_bulk", "queue=dlq type=none"},
		{http.MethodPost, "/api/v1/dlq/purge", `{"error_class":"Nothing"}`, 200, "dlq.purge_bulk", "error_class=Nothing"},
		{http.MethodPost, "/api/v1/dlq/purge", "", 200, "dlq.purge_bulk", "all"},
	}
	for i, st := range steps {
		rid := "audit-step-" + string(rune('a'+i))
		res := b.do(t, st.method, st.path, st.body, append([]string{"X-Request-ID", rid}, admin...)...)
		require.Equal(t, st.status, res.status, "%s %s: %s", st.method, st.path, res.body)
	}
	// Refused or failed actions leave no entry.
	b.do(t, http.MethodPost, "/api/v1/tasks/"+missingID+"/cancel", "", admin...).requireError(t, http.StatusNotFound, codeTaskNotFound, "")
	// (The purge step cancelled the task made due.)
	b.do(t, http.MethodPost, "/api/v1/tasks/"+later+"/run-now", "", admin...).requireError(t, http.StatusConflict, codeTaskTerminal, "")
	b.do(t, http.MethodPost, "/api/v1/queues/idle/pause", "", "Authorization", "Bearer rd-1").requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodPost, "/api/v1/queues/Bad/pause", "", admin...).requireError(t, http.StatusBadRequest, codeInvalidRequest, "queue")

	entries := b.audit(t, admin...)
	require.Len(t, entries, len(steps))
	lines := b.logLines(t, "admin action")
	require.Len(t, lines, len(steps))
	for i, st := range steps {
		e := entries[len(steps)-1-i] // newest first
		rid := "audit-step-" + string(rune('a'+i))
		require.Equal(t, "night-shift", e.Actor, st.action)
		require.Equal(t, "admin", e.Role)
		require.Equal(t, st.action, e.Action)
		require.Equal(t, st.target, e.Target, st.action)
		require.Equal(t, rid, e.RequestID)
		require.False(t, e.TS.IsZero())
		require.NotEmpty(t, e.ID)

		require.Equal(t, st.action, lines[i]["action"])
		require.Equal(t, "night-shift", lines[i]["actor"])
		require.Equal(t, st.target, lines[i]["target"])
		require.Equal(t, rid, lines[i]["request_id"])
	}
	require.Equal(t, "dup", entries[len(steps)-1].Detail, "the cancel reason")
	require.Contains(t, entries[0].Detail, "matched")

	// Only admins read the audit log.
	b.do(t, http.MethodGet, "/api/v1/audit", "", "Authorization", "Bearer rd-1").requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodGet, "/api/v1/audit", "").requireError(t, http.StatusUnauthorized, codeUnauthorized, "")
}

func TestAuditPagesAndOpenMode(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, q := range []string{"a", "b", "c", "d", "e"} {
		require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/queues/"+q+"/pause", "").status)
	}
	var targets []string
	next := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		q := url.Values{"limit": {"2"}}
		if next != "" {
			q.Set("cursor", next)
		}
		var l auditListJSON
		b.do(t, http.MethodGet, "/api/v1/audit?"+q.Encode(), "").decode(t, &l)
		for _, e := range l.Items {
			require.Equal(t, "anonymous", e.Actor)
			require.Equal(t, "open", e.Role)
			targets = append(targets, e.Target)
		}
		if l.NextCursor == nil {
			break
		}
		next = *l.NextCursor
	}
	require.Equal(t, []string{"e", "d", "c", "b", "a"}, targets)

	// The pause event names the same actor.
	msgs, err := b.rc.XRange(b.ctx, b.keys.Events("a"), "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.JSONEq(t, `{"actor":"anonymous"}`, msgs[0].Values["meta"].(string))

	for _, tc := range []struct{ query, field string }{
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"cursor=abc", "cursor"},
		{"cursor=1-0", "cursor"}, // an entry id is not a cursor
		{"cursor=" + cursor.Encode(cursor.Audit, "0", "0"), "cursor"},
		{"cursor=" + cursor.Encode(cursor.Audit, "1"), "cursor"},
		{"cursor=" + cursor.Encode(cursor.Audit, "-1", "0"), "cursor"},
		{"cursor=" + cursor.Encode(cursor.Audit, "1", "2", "3"), "cursor"},
		{"actor=x", "actor"},
	} {
		b.do(t, http.MethodGet, "/api/v1/audit?"+tc.query, "").requireError(t, http.StatusBadRequest, codeInvalidRequest, tc.field)
	}
	// A cursor past the end is simply an empty page.
	res := b.do(t, http.MethodGet, "/api/v1/audit?cursor="+cursor.Encode(cursor.Audit, "1", "0"), "")
	require.Equal(t, http.StatusOK, res.status)
	require.JSONEq(t, `{"items":[],"next_cursor":null}`, string(res.body))
}

// When the audit append fails, the action stands and is answered as done;
// the failure is logged.
func TestAuditFailureIsLoggedNotAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "echo", Queue: "idle"})
	require.NoError(t, b.rc.Set(b.ctx, b.keys.Audit(), "not a stream", 0).Err())

	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/cancel", "", "X-Request-ID", "lost-audit")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	require.Equal(t, "cancelled", b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "").task(t).Status)

	failed := b.logLines(t, "audit append failed; the action took effect but is missing from the audit log")
	require.Len(t, failed, 1)
	require.Equal(t, "lost-audit", failed[0]["request_id"])
	require.Equal(t, "task.cancel", failed[0]["action"])
	require.Equal(t, id, failed[0]["target"])
	require.Len(t, b.logLines(t, "admin action"), 1)
}
