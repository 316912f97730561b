package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

type batchJSON struct {
	Items []struct {
		Index      int        `json:"index"`
		HTTPStatus int        `json:"http_status"`
		Duplicate  bool       `json:"duplicate"`
		Task       *taskJSON  `json:"task"`
		Error      *errorBody `json:"error"`
	} `json:"items"`
}

func (b *bundle) batch(t *testing.T, body string, hdr ...string) *response {
	t.Helper()
	return b.do(t, http.MethodPost, "/api/v1/tasks/batch", body, hdr...)
}

func TestBatchMixedItemsInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	done := b.post(t, `{"task_type":"echo","payload":{"v":1}}`, "Idempotency-Key", "done")
	require.Equal(t, http.StatusAccepted, done.status)
	doneID := done.task(t).TaskID
	b.finish(t, "default", "done", doneID, "completed", "succeeded")

	res := b.batch(t, `{"tasks":[
		{"task_type":"echo","idempotency_key":"k1"},
		{"task_type":"echo","priority":10},
		{"task_type":"echo","idempotency_key":"k1"},
		{"task_type":"echo","payload":{"v":1},"idempotency_key":"done"},
		"not a task",
		{"task_type":"other","idempotency_key":"done"},
		{"task_type":"echo","queue":"second"}
	]}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var out batchJSON
	require.NoError(t, json.Unmarshal(res.body, &out))
	require.Len(t, out.Items, 7)

	want := []struct {
		status int
		code   string
	}{
		{202, ""}, {400, codeInvalidTask}, {409, codeIdemInProgress}, {200, ""},
		{400, codeInvalidRequest}, {422, codeIdemKeyMismatch}, {202, ""},
	}
	for i, it := range out.Items {
		require.Equal(t, i, it.Index)
		require.Equal(t, want[i].status, it.HTTPStatus, "item %d: %s", i, res.body)
		if want[i].code == "" {
			require.Nil(t, it.Error, "item %d", i)
			require.NotNil(t, it.Task, "item %d", i)
			continue
		}
		require.Nil(t, it.Task, "item %d", i)
		require.NotNil(t, it.Error, "item %d", i)
		require.Equal(t, want[i].code, it.Error.Code, "item %d", i)
		require.NotNil(t, it.Error.Details, "item %d", i)
		require.Equal(t, res.header.Get("X-Request-ID"), it.Error.RequestID)
	}
	first := out.Items[0].Task.TaskID
	require.False(t, out.Items[0].Duplicate)
	require.Equal(t, "priority", out.Items[1].Error.Details["field"])
	require.Equal(t, first, out.Items[2].Error.Details["task_id"])
	require.True(t, out.Items[3].Duplicate)
	require.Equal(t, doneID, out.Items[3].Task.TaskID)
	require.Equal(t, doneID, out.Items[5].Error.Details["task_id"])
	require.Equal(t, "second", out.Items[6].Task.Queue)

	// Exactly the two new tasks (plus the earlier one) exist.
	got := b.do(t, http.MethodGet, "/api/v1/tasks?limit=10", "")
	var list struct{ Items []taskJSON }
	require.NoError(t, json.Unmarshal(got.body, &list))
	require.Len(t, list.Items, 3)
}

func TestBatchQueueFullPerItem(t *testing.T) {
	t.Parallel()
	b := setup(t, options{client: func(c *dtq.ClientConfig) { c.MaxQueueDepth = 1 }})
	res := b.batch(t, `{"tasks":[{"task_type":"echo"},{"task_type":"echo"}]}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var out batchJSON
	require.NoError(t, json.Unmarshal(res.body, &out))
	require.Equal(t, 202, out.Items[0].HTTPStatus)
	require.Equal(t, 429, out.Items[1].HTTPStatus)
	d := out.Items[1].Error.Details
	require.Equal(t, "default", d["queue"])
	require.Equal(t, float64(1), d["depth"])
	require.Equal(t, float64(1), d["limit"])
	require.GreaterOrEqual(t, d["retry_after_s"], float64(1))
}

func TestBatchRequestErrors(t *testing.T) {
	t.Parallel()
	item := `{"task_type":"echo"}`
	many := `{"tasks":[` + strings.TrimSuffix(strings.Repeat(item+",", 1001), ",") + `]}`
	huge := `{"tasks":[{"task_type":"echo","payload":{"s":"` + strings.Repeat("x", 16<<20) + `"}}]}`
	for _, tc := range []struct {
		name   string
		body   string
		hdr    []string
		status int
		code   string
		field  string
	}{
		{"over 1000 items", many, nil, 400, codeInvalidRequest, "tasks"},
		{"no items", `{"tasks":[]}`, nil, 400, codeInvalidRequest, "tasks"},
		{"tasks missing", `{}`, nil, 400, codeInvalidRequest, "tasks"},
		{"tasks not an array", `{"tasks":{"task_type":"echo"}}`, nil, 400, codeInvalidRequest, "tasks"},
		{"tasks null", `{"tasks":null}`, nil, 400, codeInvalidRequest, "tasks"},
		{"unknown field", `{"tasks":[` + item + `],"atomic":true}`, nil, 400, codeInvalidRequest, "atomic"},
		{"not an object", `[` + item + `]`, nil, 400, codeInvalidRequest, ""},
		{"unparsable", `{"tasks":[`, nil, 400, codeInvalidRequest, ""},
		{"idempotency header", `{"tasks":[` + item + `]}`, []string{"Idempotency-Key", "k"}, 400, codeInvalidRequest, "Idempotency-Key"},
		{"content type", `{"tasks":[` + item + `]}`, []string{"Content-Type", "text/plain"}, 415, codeInvalidRequest, "Content-Type"},
		{"body over 16 MiB", huge, nil, 413, codePayloadTooLarge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			res := b.batch(t, tc.body, tc.hdr...)
			res.requireError(t, tc.status, tc.code, tc.field)
			require.Zero(t, b.keyCount(t))
		})
	}
}

func TestBatchOf1000(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	item := `{"task_type":"echo"}`
	res := b.batch(t, `{"tasks":[`+strings.TrimSuffix(strings.Repeat(item+",", 1000), ",")+`]}`)
	require.Equal(t, http.StatusOK, res.status)
	var out batchJSON
	require.NoError(t, json.Unmarshal(res.body, &out))
	require.Len(t, out.Items, 1000)
	for i, it := range out.Items {
		require.Equal(t, i, it.Index)
		require.Equal(t, 202, it.HTTPStatus)
	}
	require.Equal(t, "1000", b.rc.Get(b.ctx, b.keys.Depth("default")).Val())
}
