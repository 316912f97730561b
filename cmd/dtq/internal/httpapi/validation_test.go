package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

func TestSubmitValidation(t *testing.T) {
	t.Parallel()
	bigPayload := `{"s":"` + strings.Repeat("x", testPayloadLimit) + `"}`
	bigMeta := `{"s":"` + strings.Repeat("x", dtq.MaxMetadataBytes) + `"}`
	overCap := `{"task_type":"echo","payload":{"s":"` + strings.Repeat("x", 2*testPayloadLimit+64<<10) + `"}}`
	long := strings.Repeat("k", 256)

	for _, tc := range []struct {
		name   string
		body   string
		hdr    []string
		status int
		code   string
		field  string
	}{
		{"missing task_type", `{"payload":{}}`, nil, 400, codeInvalidTask, "task_type"},
		{"bad task_type", `{"task_type":"no spaces"}`, nil, 400, codeInvalidTask, "task_type"},
		{"bad queue", `{"task_type":"echo","queue":"Bad Queue"}`, nil, 400, codeInvalidTask, "queue"},
		{"empty queue", `{"task_type":"echo","queue":""}`, nil, 400, codeInvalidTask, "queue"},
		{"priority 10", `{"task_type":"echo","priority":10}`, nil, 400, codeInvalidTask, "priority"},
		{"priority not a number", `{"task_type":"echo","priority":"high"}`, nil, 400, codeInvalidTask, "priority"},
		{"max_attempts 0", `{"task_type":"echo","max_attempts":0}`, nil, 400, codeInvalidTask, "max_attempts"},
		{"max_attempts over cap", `{"task_type":"echo","max_attempts":11}`, nil, 400, codeInvalidTask, "max_attempts"},
		{"timeout_ms 0", `{"task_type":"echo","timeout_ms":0}`, nil, 400, codeInvalidTask, "timeout_ms"},
		{"delay_ms negative", `{"task_type":"echo","delay_ms":-1}`, nil, 400, codeInvalidTask, "delay_ms"},
		{"delay_ms over a year", `{"task_type":"echo","delay_ms":31536000001}`, nil, 400, codeInvalidTask, "delay_ms"},
		{"run_at unparsable", `{"task_type":"echo","run_at":"tomorrow"}`, nil, 400, codeInvalidTask, "run_at"},
		{"expires_at before available", `{"task_type":"echo","expires_at":"2001-01-01T00:00:00Z"}`, nil, 400, codeInvalidTask, "expires_at"},
		{"expires_at before delayed start", `{"task_type":"echo","delay_ms":60000,"ttl_seconds":30}`, nil, 400, codeInvalidTask, "ttl_seconds"},
		{"ttl_seconds 0", `{"task_type":"echo","ttl_seconds":0}`, nil, 400, codeInvalidTask, "ttl_seconds"},
		{"payload not object", `{"task_type":"echo","payload":[1,2]}`, nil, 400, codeInvalidTask, "payload"},
		{"payload too large", `{"task_type":"echo","payload":` + bigPayload + `}`, nil, 413, codePayloadTooLarge, "payload"},
		{"metadata over 4 KiB", `{"task_type":"echo","metadata":` + bigMeta + `}`, nil, 400, codeInvalidTask, "metadata"},
		{"metadata not object", `{"task_type":"echo","metadata":"x"}`, nil, 400, codeInvalidTask, "metadata"},
		{"payload nesting over 64", `{"task_type":"echo","payload":` + nested(65) + `}`, nil, 400, codeInvalidTask, "payload"},
		// Far deeper bodies are refused before any field is decoded.
		{"body nesting far over 64", `{"task_type":"echo","payload":` + nested(80) + `}`, nil, 400, codeInvalidRequest, ""},
		{"idempotency key 256 chars in body", `{"task_type":"echo","idempotency_key":"` + long + `"}`, nil, 400, codeInvalidTask, "idempotency_key"},
		{"idempotency key 256 chars in header", `{"task_type":"echo"}`, []string{"Idempotency-Key", long}, 400, codeInvalidTask, "idempotency_key"},
		{"idempotency key control char", `{"task_type":"echo","idempotency_key":"a\u0001b"}`, nil, 400, codeInvalidTask, "idempotency_key"},
		{"idempotency key non-ASCII header", `{"task_type":"echo"}`, []string{"Idempotency-Key", "clé"}, 400, codeInvalidTask, "idempotency_key"},
		{"empty idempotency header", `{"task_type":"echo"}`, []string{"Idempotency-Key", ""}, 400, codeInvalidTask, "idempotency_key"},
		{"bad quoted idempotency header", `{"task_type":"echo"}`, []string{"Idempotency-Key", `"a"b"`}, 400, codeInvalidTask, "idempotency_key"},
		{"unknown field", `{"task_type":"echo","colour":"red"}`, nil, 400, codeInvalidTask, "colour"},
		{"unparsable JSON", `{"task_type":`, nil, 400, codeInvalidRequest, ""},
		{"not an object", `["echo"]`, nil, 400, codeInvalidRequest, ""},
		{"empty body", ` `, nil, 400, codeInvalidRequest, ""},
		{"body over cap", overCap, nil, 413, codePayloadTooLarge, ""},
		{"not JSON content type", `{"task_type":"echo"}`, []string{"Content-Type", "text/plain"}, 415, codeInvalidRequest, "Content-Type"},
		{"form content type", `task_type=echo`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, codeInvalidRequest, "Content-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			before := b.keyCount(t)
			res := b.post(t, tc.body, tc.hdr...)
			res.requireError(t, tc.status, tc.code, tc.field)
			require.Equal(t, before, b.keyCount(t), "a rejected request wrote to Redis")
		})
	}
}

func TestSubmitUnknownTaskType(t *testing.T) {
	t.Parallel()
	b := setup(t, options{client: func(c *dtq.ClientConfig) { c.TaskTypes = []string{"echo"} }})
	res := b.post(t, `{"task_type":"nope"}`)
	res.requireError(t, http.StatusBadRequest, codeUnknownTaskType, "task_type")
	require.Zero(t, b.keyCount(t))
	ok := b.post(t, `{"task_type":"echo"}`)
	require.Equal(t, http.StatusAccepted, ok.status)
}

func TestSubmitAcceptsJSONContentTypes(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/vnd.dtq+json"} {
		res := b.post(t, `{"task_type":"echo"}`, "Content-Type", ct)
		require.Equal(t, http.StatusAccepted, res.status, ct)
	}
}

func TestSubmitOptionalFieldsAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type":"echo","queue":"q_1","payload":null,"priority":0,"max_attempts":10,
		"timeout_ms":3600000,"run_at":"2001-01-01T00:00:00Z","ttl_seconds":60,"metadata":{"ttl_seconds":5},
		"idempotency_key":"k 1"}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	tk := res.task(t)
	require.Equal(t, "q_1", tk.Queue)
	require.JSONEq(t, `{}`, string(tk.Payload))
	require.Equal(t, "k 1", *tk.IdempotencyKey)
}
