package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// The submit answer is the task GET returns plus "duplicate", and both are
// byte for byte what encoding/json makes of the stored task.
func TestSubmitAnswerMatchesGet(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type":"echo","queue":"q","payload":{ "html" : "<a href='x'>&</a>", "sep": "\u2028" },`+
		`"metadata":{"n":[1, 2.5]}}`, "Idempotency-Key", "k<1>")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	id := res.task(t).TaskID

	get := b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "")
	require.Equal(t, http.StatusOK, get.status, string(get.body))
	var submitted, got map[string]any
	res.decode(t, &submitted)
	get.decode(t, &got)
	require.Equal(t, false, submitted["duplicate"])
	delete(submitted, "duplicate")
	require.Equal(t, got, submitted)

	stored, err := b.insp.GetTask(b.ctx, id)
	require.NoError(t, err)
	want, err := json.Marshal(stored)
	require.NoError(t, err)
	require.Equal(t, string(want)+"\n", string(get.body))
	want, err = json.Marshal(taskResponse{TaskInfo: stored})
	require.NoError(t, err)
	require.Equal(t, string(want)+"\n", string(res.body))
}

// writeJSON's fast path for task answers must write what encoding/json
// would, headers included.
func TestWriteJSONTaskAnswers(t *testing.T) {
	t.Parallel()
	at := dtqtype.Time{Time: time.Date(2025, 6, 1, 12, 0, 0, 250_000_000, time.UTC)}
	key := "k&<>"
	task := &dtqtype.TaskInfo{ID: "t1", Queue: "q", Type: "echo\u2028", Payload: json.RawMessage(` { "a" : "<b>" } `),
		MaxAttempts: 3, Attempt: 1, IdempotencyKey: &key, Status: dtqtype.StatusQueued, CreatedAt: at,
		Attempts: []dtqtype.AttemptRecord{{Attempt: 1, StartedAt: at, Outcome: "failed", ErrorMessage: "\xff"}}}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	req := httptest.NewRequest(http.MethodGet, "/api/v1/tasks/t1", nil)
	for _, v := range []any{
		taskResponse{TaskInfo: task},
		taskResponse{TaskInfo: task, Duplicate: true},
		taskResponse{Duplicate: true},
		task,
		(*dtqtype.TaskInfo)(nil),
		map[string]any{"items": []*dtqtype.TaskInfo{task}},
	} {
		want, err := json.Marshal(v)
		require.NoError(t, err)
		rec := httptest.NewRecorder()
		s.writeJSON(rec, req, http.StatusAccepted, v)
		require.Equal(t, http.StatusAccepted, rec.Code)
		require.Equal(t, string(want)+"\n", rec.Body.String())
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		require.Equal(t, strconv.Itoa(len(want)+1), rec.Header().Get("Content-Length"))
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
	}
}

// A task whose raw JSON is broken cannot be encoded either way: the answer
// is a logged 500.
func TestWriteJSONBrokenTask(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	s := &Server{log: slog.New(slog.NewJSONHandler(logs, nil))}
	req := httptest.NewRequest(http.MethodGet, "/api/v1/tasks/t1", nil)
	broken := &dtqtype.TaskInfo{ID: "t1", Payload: json.RawMessage(`{"a":`)}
	for _, v := range []any{broken, taskResponse{TaskInfo: broken}} {
		rec := httptest.NewRecorder()
		s.writeJSON(rec, req, http.StatusOK, v)
		require.Equal(t, http.StatusInternalServerError, rec.Code)
		var e errorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
		require.Equal(t, codeInternal, e.Code)
	}
	require.Contains(t, logs.String(), "encode response")
}
