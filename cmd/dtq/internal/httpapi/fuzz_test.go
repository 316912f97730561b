package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dtq-io/dtq"
)

// FuzzSubmit posts arbitrary bodies and headers to POST /api/v1/tasks and
// to the batch route: no client input may produce a 5xx, and every error is
// the envelope.
func FuzzSubmit(f *testing.F) {
	for _, seed := range []struct{ body, key, ctype string }{
		{`{"task_type":"echo","payload":{"a":1}}`, "", "application/json"},
		{`{"task_type":"echo","queue":"q","priority":9,"max_attempts":3,"timeout_ms":1000,"delay_ms":5000,"metadata":{"ttl_seconds":60}}`, "k1", "application/json"},
		{`{"task_type":"echo","run_at":"2030-01-01T00:00:00Z","expires_at":"2031-01-01T00:00:00Z"}`, `"quoted"`, "application/json; charset=utf-8"},
		{`{"task_type":"echo","payload":[1]}`, "", "application/json"},
		{`{"task_type":"echo","priority":1e3}`, "", "application/json"},
		{`{"task_type":"echo","ttl_seconds":-5,"idempotency_key":"x"}`, "\x00\x01", "application/json"},
		{`{"task_type":"\u0000","queue":"Ω"}`, strings.Repeat("k", 300), "application/json"},
		{`{"task_type":"echo","payload":` + nested(70) + `}`, "", "application/json"},
		{`{"task_type":"echo","payload":{"s":"\ud800"}}`, "", "application/json"},
		{`{"task_type":"echo","metadata":{"ttl_seconds":"soon"}}`, "", "application/json"},
		{`{"tasks":[{"task_type":"echo"},1,null,{"priority":-1}]}`, "", "application/json"},
		{`{`, "", "application/json"},
		{`null`, "", "application/json"},
		{``, "", ""},
		{`{"task_type":"echo"}`, "", "text/plain"},
		{"\xff\xfe{}", "\"", "application/json;;"},
	} {
		f.Add([]byte(seed.body), seed.key, seed.ctype)
	}
	b := setup(f, options{})
	f.Fuzz(func(t *testing.T, body []byte, key, ctype string) {
		for _, path := range []string{"/api/v1/tasks", "/api/v1/tasks/batch"} {
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			if ctype != "" {
				req.Header.Set("Content-Type", ctype)
			}
			if key != "" && path == "/api/v1/tasks" {
				req.Header.Set("Idempotency-Key", key)
			}
			rec := httptest.NewRecorder()
			b.api.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s answered %d: %s", path, rec.Code, rec.Body)
			}
			requireDocumented(t, req, rec)
			if rec.Code >= 400 {
				var e errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.RequestID == "" || e.Details == nil {
					t.Fatalf("%s answered %d without the envelope: %s", path, rec.Code, rec.Body)
				}
			}
		}
	})
}

// FuzzOperatorInput sends arbitrary bodies and query strings to the
// operator routes that parse them: no client input may produce a 5xx, and
// every error is the envelope.
func FuzzOperatorInput(f *testing.F) {
	for _, seed := range []struct{ body, query, ctype string }{
		{`{"reason":"dup"}`, "", "application/json"},
		{`{"queue":"q","type":"t","error_class":"E","cursor":"eyJxIjowLCJvIjowfQ"}`, "", "application/json"},
		{``, "queue=q&type=t&error_class=E", ""},
		{`{"reason":"` + strings.Repeat("é", 201) + `"}`, "", "application/json"},
		{`{"reason":"\u0007"}`, "cursor=eyJxIjo5OX0", "application/json; charset=utf-8"},
		{`{"queue":7}`, "window=15&limit=2", "application/json"},
		{`[]`, "cursor=0-0", "application/json"},
		{`{"x":1}`, "queue=Bad", "text/plain"},
		{"\xff", "%zz", "application/json"},
	} {
		f.Add([]byte(seed.body), seed.query, seed.ctype)
	}
	b := setup(f, options{})
	ids := []string{missingID}
	for range 2 {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "echo", Queue: "q"})
		if err != nil {
			f.Fatal(err)
		}
		ids = append(ids, res.TaskID)
	}
	f.Fuzz(func(t *testing.T, body []byte, query, ctype string) {
		for _, rq := range []struct{ method, path string }{
			{http.MethodPost, "/api/v1/tasks/" + ids[len(body)%len(ids)] + "/cancel"},
			{http.MethodPost, "/api/v1/queues/q/pause"},
			{http.MethodPost, "/api/v1/dlq/requeue"},
			{http.MethodPost, "/api/v1/dlq/purge"},
			{http.MethodGet, "/api/v1/dlq"},
			{http.MethodGet, "/api/v1/stats"},
			{http.MethodGet, "/api/v1/audit"},
		} {
			req := httptest.NewRequest(rq.method, "/", bytes.NewReader(body))
			req.URL.Path, req.URL.RawQuery = rq.path, query
			if ctype != "" {
				req.Header.Set("Content-Type", ctype)
			}
			rec := httptest.NewRecorder()
			b.api.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %s?%s answered %d: %s", rq.method, rq.path, query, rec.Code, rec.Body)
			}
			requireDocumented(t, req, rec)
			if rec.Code >= 400 {
				var e errorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.RequestID == "" || e.Details == nil {
					t.Fatalf("%s %s answered %d without the envelope: %s", rq.method, rq.path, rec.Code, rec.Body)
				}
			}
		}
	})
}
