package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

const (
	testTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testTracestate  = "vendor=opaque"
)

func TestWithTraceContext(t *testing.T) {
	t.Parallel()
	tp := testTraceparent
	for _, tc := range []struct {
		name     string
		headers  [][2]string // name, value; repeated names repeat the header
		metadata any         // as Submission.UnmarshalJSON leaves it
		want     any         // nil: metadata left as it was
	}{
		{name: "no header", metadata: json.RawMessage(`{"a":1}`)},
		{name: "into no metadata", headers: [][2]string{{"traceparent", tp}},
			want: `{"traceparent":"` + tp + `"}`},
		{name: "into null", headers: [][2]string{{"traceparent", tp}}, metadata: json.RawMessage(`null`),
			want: `{"traceparent":"` + tp + `"}`},
		{name: "into empty object", headers: [][2]string{{"traceparent", tp}}, metadata: json.RawMessage(` { } `),
			want: `{"traceparent":"` + tp + `"}`},
		{name: "beside members, kept as written", headers: [][2]string{{"traceparent", tp}, {"tracestate", testTracestate}},
			metadata: json.RawMessage(`{"b": [1, 2], "a":"x"}`),
			want:     `{"traceparent":"` + tp + `","tracestate":"vendor=opaque","b": [1, 2], "a":"x"}`},
		{name: "repeated tracestate is one list", headers: [][2]string{{"traceparent", tp}, {"tracestate", "a=1"}, {"tracestate", "b=2"}},
			want: `{"traceparent":"` + tp + `","tracestate":"a=1,b=2"}`},
		{name: "body's traceparent wins", headers: [][2]string{{"traceparent", tp}, {"tracestate", testTracestate}},
			metadata: json.RawMessage(`{"traceparent":"mine"}`)},
		{name: "body's tracestate kept", headers: [][2]string{{"traceparent", tp}, {"tracestate", testTracestate}},
			metadata: json.RawMessage(`{"tracestate":"mine=1"}`),
			want:     `{"traceparent":"` + tp + `","tracestate":"mine=1"}`},
		{name: "tracestate alone", headers: [][2]string{{"tracestate", testTracestate}}},
		{name: "malformed traceparent", headers: [][2]string{{"traceparent", "00-xyz"}}},
		{name: "uppercase traceparent", headers: [][2]string{{"traceparent", strings.ToUpper(tp)}}},
		{name: "two traceparents", headers: [][2]string{{"traceparent", tp}, {"traceparent", tp}}},
		{name: "overlong tracestate dropped", headers: [][2]string{{"traceparent", tp}, {"tracestate", "a=" + strings.Repeat("x", maxTracestate)}},
			want: `{"traceparent":"` + tp + `"}`},
		{name: "quote in tracestate escaped", headers: [][2]string{{"traceparent", tp}, {"tracestate", `a="b\`}},
			want: `{"traceparent":"` + tp + `","tracestate":"a=\"b\\"}`},
		{name: "metadata not an object", headers: [][2]string{{"traceparent", tp}}, metadata: json.RawMessage(`[1]`)},
		{name: "metadata not JSON", headers: [][2]string{{"traceparent", tp}}, metadata: json.RawMessage(`{"a":`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodPost, "/api/v1/tasks", nil)
			for _, h := range tc.headers {
				r.Header.Add(h[0], h[1])
			}
			sub := dtq.Submission{Metadata: tc.metadata}
			withTraceContext(r, &sub)
			if tc.want == nil {
				require.Equal(t, tc.metadata, sub.Metadata)
				return
			}
			got, ok := sub.Metadata.(json.RawMessage)
			require.True(t, ok, "%T", sub.Metadata)
			require.Equal(t, tc.want, string(got))
			require.True(t, json.Valid(got), string(got))
		})
	}
}

// A traced caller's headers reach the stored task's metadata, on single
// and batch submissions alike; the body's own trace context wins.
func TestSubmitCarriesTraceHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	metadataOf := func(id string) map[string]any {
		task, err := b.insp.GetTask(b.ctx, id)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(task.Metadata, &m))
		return m
	}

	res := b.post(t, `{"task_type":"echo","metadata":{"tenant":"a"}}`, "traceparent", testTraceparent, "tracestate", testTracestate)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	require.Equal(t, map[string]any{"tenant": "a", "traceparent": testTraceparent, "tracestate": testTracestate},
		metadataOf(res.task(t).TaskID))

	res = b.post(t, `{"task_type":"echo","metadata":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}`,
		"traceparent", testTraceparent)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	require.Equal(t, map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		metadataOf(res.task(t).TaskID))

	res = b.do(t, http.MethodPost, "/api/v1/tasks/batch", `{"tasks":[{"task_type":"echo"},{"task_type":"echo","metadata":{"n":1}}]}`,
		"traceparent", testTraceparent)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var batch struct {
		Items []struct {
			Task taskJSON `json:"task"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(res.body, &batch))
	require.Len(t, batch.Items, 2)
	require.Equal(t, map[string]any{"traceparent": testTraceparent}, metadataOf(batch.Items[0].Task.TaskID))
	require.Equal(t, map[string]any{"n": 1.0, "traceparent": testTraceparent}, metadataOf(batch.Items[1].Task.TaskID))
}

// FuzzWithTraceContext: whatever the headers and metadata, an object stays
// a valid object with every member it had, and anything else is untouched.
func FuzzWithTraceContext(f *testing.F) {
	f.Add(`{"a":1}`, testTraceparent, testTracestate)
	f.Add(` { } `, testTraceparent, "")
	f.Add(`{"tracestate":"x","b":[{}]}`, testTraceparent, `a="\`)
	f.Add(`[1]`, testTraceparent, "")
	f.Add(`{"a":`, "00-zz", "\x00")
	f.Add(`null`, strings.ToUpper(testTraceparent), "a=1")
	f.Fuzz(func(t *testing.T, metadata, traceparent, tracestate string) {
		r := httptest.NewRequest(http.MethodPost, "/api/v1/tasks", nil)
		r.Header["Traceparent"] = []string{traceparent}
		r.Header["Tracestate"] = []string{tracestate}
		sub := dtq.Submission{Metadata: json.RawMessage(metadata)}
		withTraceContext(r, &sub)
		got := string(sub.Metadata.(json.RawMessage))
		var before map[string]json.RawMessage
		isObject := json.Unmarshal([]byte(metadata), &before) == nil && before != nil
		if got == metadata {
			return // left alone
		}
		require.True(t, isObject || strings.TrimSpace(metadata) == "" || strings.TrimSpace(metadata) == "null",
			"changed metadata that is not an object: %q -> %q", metadata, got)
		var after map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(got), &after), got)
		require.Equal(t, traceparent, jsonText(t, after["traceparent"]))
		for k, v := range before {
			if k != "traceparent" {
				require.JSONEq(t, string(v), string(after[k]), "member %q", k)
			}
		}
	})
}

func jsonText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	require.NoError(t, json.Unmarshal(raw, &s), string(raw))
	return s
}
