package dtq_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// submitJSON decodes body as the HTTP API does and submits it.
func (b *bundle) submitJSON(body string) (*dtq.SubmitResult, error) {
	var s dtq.Submission
	if err := s.UnmarshalJSON([]byte(body)); err != nil {
		return nil, err
	}
	return b.client.Submit(b.ctx, s)
}

// fixedClock returns a clock frozen at the current millisecond, and that time.
func fixedClock() (func() time.Time, time.Time) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return func() time.Time { return now }, now
}

func TestSubmissionFieldErrors(t *testing.T) {
	t.Parallel()
	clock, now := fixedClock()
	b := setupDeployment(t, func(c *dtq.DeploymentConfig) { c.Clock = clock }, func(c *dtq.ClientConfig) { c.MaxPayloadBytes = 64 })
	at := func(d time.Duration) string { return `"` + now.Add(d).Format(time.RFC3339Nano) + `"` }
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }

	cases := []struct {
		name  string
		body  string // fields added to {"task_type":"echo", …} unless it starts with '!'
		field string // "" when kind is ErrInvalidJSON
		kind  error
	}{
		{"empty body", "!", "", dtq.ErrInvalidJSON},
		{"array body", "![]", "", dtq.ErrInvalidJSON},
		{"null body", "!null", "", dtq.ErrInvalidJSON},
		{"string body", `!"echo"`, "", dtq.ErrInvalidJSON},
		{"truncated", `!{"task_type":"echo"`, "", dtq.ErrInvalidJSON},
		{"trailing garbage", `!{"task_type":"echo"} x`, "", dtq.ErrInvalidJSON},
		{"nested too deep", `!{"task_type":"echo","payload":` + deep(70) + `}`, "", dtq.ErrInvalidJSON},

		{"unknown field", `"prio":5`, "prio", dtq.ErrInvalidTask},
		{"task_type missing", `!{}`, "task_type", dtq.ErrInvalidTask},
		{"task_type empty", `!{"task_type":""}`, "task_type", dtq.ErrInvalidTask},
		{"task_type number", `!{"task_type":7}`, "task_type", dtq.ErrInvalidTask},
		{"task_type space", `!{"task_type":"send email"}`, "task_type", dtq.ErrInvalidTask},
		{"task_type slash", `!{"task_type":"a/b"}`, "task_type", dtq.ErrInvalidTask},
		{"task_type 129 chars", `!{"task_type":"` + strings.Repeat("a", 129) + `"}`, "task_type", dtq.ErrInvalidTask},
		{"queue empty", `"queue":""`, "queue", dtq.ErrInvalidTask},
		{"queue uppercase", `"queue":"Emails"`, "queue", dtq.ErrInvalidTask},
		{"queue leading dash", `"queue":"-x"`, "queue", dtq.ErrInvalidTask},
		{"queue 65 chars", `"queue":"` + strings.Repeat("q", 65) + `"`, "queue", dtq.ErrInvalidTask},
		{"queue with brace", `"queue":"a{b}"`, "queue", dtq.ErrInvalidTask},
		{"queue newline", `"queue":"a\n"`, "queue", dtq.ErrInvalidTask},
		{"queue number", `"queue":1`, "queue", dtq.ErrInvalidTask},
		{"payload array", `"payload":[1]`, "payload", dtq.ErrInvalidTask},
		{"payload string", `"payload":"{}"`, "payload", dtq.ErrInvalidTask},
		{"payload number", `"payload":1`, "payload", dtq.ErrInvalidTask},
		{"payload nested too deep", `"payload":` + deep(65), "payload", dtq.ErrInvalidTask},
		{"metadata nested too deep", `"metadata":` + deep(65), "metadata", dtq.ErrInvalidTask},
		{"payload too large", `"payload":{"s":"` + strings.Repeat("x", 60) + `"}`, "payload", dtq.ErrPayloadTooLarge},
		{"metadata array", `"metadata":[]`, "metadata", dtq.ErrInvalidTask},
		{"payload lone high surrogate", `"payload":{"s":"\ud800"}`, "payload", dtq.ErrInvalidTask},
		{"payload lone high surrogate dbff", `"payload":{"s":"a\udbffb"}`, "payload", dtq.ErrInvalidTask},
		{"payload lone low surrogate", `"payload":{"s":"\udc00"}`, "payload", dtq.ErrInvalidTask},
		{"payload high then non-low", `"payload":{"s":"\ud800\u0041"}`, "payload", dtq.ErrInvalidTask},
		{"payload reversed pair", `"payload":{"s":"\ude00\ud83d"}`, "payload", dtq.ErrInvalidTask},
		{"payload surrogate in key", `"payload":{"\uDFFF":1}`, "payload", dtq.ErrInvalidTask},
		{"metadata lone surrogate", `"metadata":{"s":"\ud800"}`, "metadata", dtq.ErrInvalidTask},
		{"metadata over 4 KiB", `"metadata":{"s":"` + strings.Repeat("x", 4096) + `"}`, "metadata", dtq.ErrInvalidTask},
		{"priority 10", `"priority":10`, "priority", dtq.ErrInvalidTask},
		{"priority -1", `"priority":-1`, "priority", dtq.ErrInvalidTask},
		{"priority fraction", `"priority":1.5`, "priority", dtq.ErrInvalidTask},
		{"priority string", `"priority":"5"`, "priority", dtq.ErrInvalidTask},
		{"priority bool", `"priority":true`, "priority", dtq.ErrInvalidTask},
		{"max_attempts 0", `"max_attempts":0`, "max_attempts", dtq.ErrInvalidTask},
		{"max_attempts over cap", `"max_attempts":11`, "max_attempts", dtq.ErrInvalidTask},
		{"max_attempts huge", `"max_attempts":99999999999`, "max_attempts", dtq.ErrInvalidTask},
		{"timeout_ms 0", `"timeout_ms":0`, "timeout_ms", dtq.ErrInvalidTask},
		{"timeout_ms over an hour", `"timeout_ms":3600001`, "timeout_ms", dtq.ErrInvalidTask},
		{"timeout_ms exponent", `"timeout_ms":1e3`, "timeout_ms", dtq.ErrInvalidTask},
		{"delay_ms negative", `"delay_ms":-1`, "delay_ms", dtq.ErrInvalidTask},
		{"delay_ms over 365 days", `"delay_ms":31536000001`, "delay_ms", dtq.ErrInvalidTask},
		{"run_at not a time", `"run_at":"tomorrow"`, "run_at", dtq.ErrInvalidTask},
		{"run_at number", `"run_at":1767225600000`, "run_at", dtq.ErrInvalidTask},
		{"run_at over 365 days", `"run_at":` + at(366*24*time.Hour), "run_at", dtq.ErrInvalidTask},
		{"expires_at not a time", `"expires_at":"2026-13-01T00:00:00Z"`, "expires_at", dtq.ErrInvalidTask},
		{"expires_at passed", `"expires_at":` + at(-time.Second), "expires_at", dtq.ErrInvalidTask},
		{"expires_at now", `"expires_at":` + at(0), "expires_at", dtq.ErrInvalidTask},
		{"expires_at at available_at", `"delay_ms":60000,"expires_at":` + at(time.Minute), "expires_at", dtq.ErrInvalidTask},
		{"expires_at before run_at", `"run_at":` + at(time.Hour) + `,"expires_at":` + at(time.Minute), "expires_at", dtq.ErrInvalidTask},
		{"ttl_seconds 0", `"ttl_seconds":0`, "ttl_seconds", dtq.ErrInvalidTask},
		{"ttl_seconds fraction", `"ttl_seconds":1.5`, "ttl_seconds", dtq.ErrInvalidTask},
		{"ttl_seconds within delay", `"delay_ms":60000,"ttl_seconds":60`, "ttl_seconds", dtq.ErrInvalidTask},
		{"metadata ttl_seconds 0", `"metadata":{"ttl_seconds":0}`, "metadata.ttl_seconds", dtq.ErrInvalidTask},
		{"metadata ttl_seconds not a number", `"metadata":{"ttl_seconds":"soon"}`, "metadata.ttl_seconds", dtq.ErrInvalidTask},
		{"metadata ttl_seconds fraction", `"metadata":{"ttl_seconds":1.5}`, "metadata.ttl_seconds", dtq.ErrInvalidTask},
		{"idempotency_key empty", `"idempotency_key":""`, "idempotency_key", dtq.ErrInvalidTask},
		{"idempotency_key number", `"idempotency_key":42`, "idempotency_key", dtq.ErrInvalidTask},
		{"idempotency_key 256 chars", `"idempotency_key":"` + strings.Repeat("k", 256) + `"`, "idempotency_key", dtq.ErrInvalidTask},
		{"idempotency_key control char", `"idempotency_key":"a\tb"`, "idempotency_key", dtq.ErrInvalidTask},
		{"idempotency_key not ASCII", `"idempotency_key":"caf\u00e9"`, "idempotency_key", dtq.ErrInvalidTask},
		{"idempotency_key quoted empty", `"idempotency_key":"\"\""`, "idempotency_key", dtq.ErrInvalidTask},
		{"idempotency_key bad quoting", `"idempotency_key":"\"a\"b\""`, "idempotency_key", dtq.ErrInvalidTask},
		{"retention_seconds negative", `"retention_seconds":-1`, "retention_seconds", dtq.ErrInvalidTask},
		{"retention_seconds past 366 days", `"retention_seconds":31622401`, "retention_seconds", dtq.ErrInvalidTask},
		{"retention_seconds fraction", `"retention_seconds":1.5`, "retention_seconds", dtq.ErrInvalidTask},
		{"retention_seconds string", `"retention_seconds":"1h"`, "retention_seconds", dtq.ErrInvalidTask},
		{"keep_payload string", `"keep_payload":"yes"`, "keep_payload", dtq.ErrInvalidTask},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := strings.TrimPrefix(c.body, "!")
			if body == c.body {
				body = `{"task_type":"echo",` + c.body + `}`
			}
			res, err := b.submitJSON(body)
			require.Nil(t, res)
			require.ErrorIs(t, err, c.kind)
			var ve *dtq.ValidationError
			if c.kind == dtq.ErrInvalidJSON {
				require.False(t, errors.As(err, &ve), "a body that is no JSON object is not a field error: %v", err)
				return
			}
			require.ErrorAs(t, err, &ve)
			require.Equal(t, c.field, ve.Field, "%v", err)
			require.NotEmpty(t, ve.Message)
			require.Equal(t, ve.Field+": "+ve.Message, ve.Error())
		})
	}
	t.Cleanup(func() {
		require.Zero(t, b.keyCount(t), "a refused submission wrote something")
	})
}

func TestSubmissionUnknownTaskType(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dtq.ClientConfig) { c.TaskTypes = []string{"echo", "send_receipt"} })
	_, err := b.submitJSON(`{"task_type":"echo"}`)
	require.NoError(t, err)
	_, err = b.submitJSON(`{"task_type":"ecko"}`)
	require.ErrorIs(t, err, dtq.ErrUnknownTaskType)
	require.NotErrorIs(t, err, dtq.ErrInvalidTask)
	var ve *dtq.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "task_type", ve.Field)
}

func TestSubmissionAcceptedValues(t *testing.T) {
	t.Parallel()
	clock, now := fixedClock()
	b := setupDeployment(t, func(c *dtq.DeploymentConfig) { c.Clock = clock }, nil)
	at := func(d time.Duration) string { return `"` + now.Add(d).Format(time.RFC3339Nano) + `"` }
	ms := func(d time.Duration) time.Time { return now.Add(d) }

	cases := []struct {
		name  string
		body  string
		check func(t *testing.T, got *dtqtype.TaskInfo)
	}{
		{"defaults", `{"task_type":"echo"}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, "default", got.Queue)
			require.Equal(t, 5, got.Priority)
			require.Equal(t, 5, got.MaxAttempts)
			require.Equal(t, int64(30000), got.TimeoutMS)
			require.JSONEq(t, `{}`, string(got.Payload))
			require.Equal(t, dtqtype.StatusQueued, got.Status)
			require.Equal(t, now, got.AvailableAt.Time)
			require.True(t, got.ExpiresAt.IsZero())
			require.Nil(t, got.IdempotencyKey)
		}},
		{"nulls mean defaults", `{"task_type":"echo","queue":null,"priority":null,"payload":null,"metadata":null,"idempotency_key":null,"delay_ms":null}`,
			func(t *testing.T, got *dtqtype.TaskInfo) {
				require.Equal(t, "default", got.Queue)
				require.Equal(t, 5, got.Priority)
				require.Nil(t, got.IdempotencyKey)
			}},
		{"bounds", `{"task_type":"` + strings.Repeat("T", 128) + `","queue":"` + strings.Repeat("q", 64) + `","priority":0,"max_attempts":10,"timeout_ms":3600000}`,
			func(t *testing.T, got *dtqtype.TaskInfo) {
				require.Equal(t, 0, got.Priority)
				require.Equal(t, 10, got.MaxAttempts)
				require.Equal(t, int64(3600000), got.TimeoutMS)
			}},
		{"type characters", `{"task_type":"billing.v2:charge_card-now"}`, nil},
		{"delay_ms", `{"task_type":"echo","delay_ms":1500}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, dtqtype.StatusPending, got.Status)
			require.Equal(t, ms(1500*time.Millisecond), got.AvailableAt.Time)
		}},
		{"delay_ms 365 days", `{"task_type":"echo","delay_ms":31536000000}`, nil},
		{"run_at ahead", `{"task_type":"echo","run_at":` + at(time.Hour) + `}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, dtqtype.StatusPending, got.Status)
			require.Equal(t, ms(time.Hour), got.AvailableAt.Time)
		}},
		{"run_at passed is available now", `{"task_type":"echo","run_at":` + at(-time.Hour) + `}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, dtqtype.StatusQueued, got.Status)
			require.Equal(t, now, got.AvailableAt.Time)
		}},
		{"run_at wins over delay_ms", `{"task_type":"echo","delay_ms":60000,"run_at":` + at(time.Hour) + `}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, ms(time.Hour), got.AvailableAt.Time)
		}},
		{"run_at with offset", `{"task_type":"echo","run_at":"` + now.Add(time.Hour).In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano) + `"}`,
			func(t *testing.T, got *dtqtype.TaskInfo) {
				require.Equal(t, ms(time.Hour), got.AvailableAt.Time)
			}},
		{"expires_at", `{"task_type":"echo","expires_at":` + at(time.Minute) + `}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, ms(time.Minute), got.ExpiresAt.Time)
		}},
		{"expires_at one ms after available_at", `{"task_type":"echo","delay_ms":60000,"expires_at":` + at(time.Minute+time.Millisecond) + `}`, nil},
		{"ttl_seconds counts from creation", `{"task_type":"echo","ttl_seconds":90}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, ms(90*time.Second), got.ExpiresAt.Time)
		}},
		{"metadata ttl_seconds", `{"task_type":"echo","metadata":{"ttl_seconds":30}}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, ms(30*time.Second), got.ExpiresAt.Time)
			require.JSONEq(t, `{"ttl_seconds":30}`, string(got.Metadata))
		}},
		{"ttl_seconds beats metadata", `{"task_type":"echo","ttl_seconds":90,"metadata":{"ttl_seconds":30}}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, ms(90*time.Second), got.ExpiresAt.Time)
		}},
		{"expires_at beats both", `{"task_type":"echo","expires_at":` + at(time.Hour) + `,"ttl_seconds":90,"metadata":{"ttl_seconds":30}}`,
			func(t *testing.T, got *dtqtype.TaskInfo) {
				require.Equal(t, ms(time.Hour), got.ExpiresAt.Time)
			}},
		// The losers of the precedence are not validated against the delay.
		{"expires_at beats a ttl inside the delay", `{"task_type":"echo","delay_ms":60000,"ttl_seconds":10,"expires_at":` + at(2*time.Minute) + `}`,
			func(t *testing.T, got *dtqtype.TaskInfo) {
				require.Equal(t, ms(2*time.Minute), got.ExpiresAt.Time)
			}},
		{"ttl beats a metadata ttl inside the delay", `{"task_type":"echo","delay_ms":60000,"ttl_seconds":120,"metadata":{"ttl_seconds":1}}`,
			func(t *testing.T, got *dtqtype.TaskInfo) {
				require.Equal(t, ms(2*time.Minute), got.ExpiresAt.Time)
			}},
		{"payload kept as sent, compacted", `{"task_type":"echo","payload":{ "b" : 1.50, "a" : [ true ] }}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, `{"b":1.50,"a":[true]}`, string(got.Payload))
		}},
		{"payload 64 levels", `{"task_type":"echo","payload":` + strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 64) + `}`, nil},
		{"payload surrogate pair", `{"task_type":"echo","payload":{"s":"\ud83d\ude00","t":"\\ud800"}}`, nil},
		{"metadata exactly 4 KiB", `{"task_type":"echo","metadata":{"s":"` + strings.Repeat("x", 4096-8) + `"}}`, nil},
		{"idempotency key unquoted", `{"task_type":"echo","idempotency_key":"\"order-42\""}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, "order-42", *got.IdempotencyKey)
		}},
		{"idempotency key with escapes", `{"task_type":"echo","idempotency_key":"\"a\\\\b\\\"c\""}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, `a\b"c`, *got.IdempotencyKey)
		}},
		{"idempotency key half quoted is literal", `{"task_type":"echo","idempotency_key":"\"abc"}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Equal(t, `"abc`, *got.IdempotencyKey)
		}},
		{"idempotency key 255 printable", `{"task_type":"echo","idempotency_key":"` + strings.Repeat("~", 254) + ` "}`, nil},
		{"retention and keep_payload", `{"task_type":"echo","retention_seconds":600,"keep_payload":true}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.EqualValues(t, 600, *got.RetentionSeconds)
			require.True(t, got.KeepPayload)
		}},
		{"retention 0 keeps nothing", `{"task_type":"echo","retention_seconds":0}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Zero(t, *got.RetentionSeconds)
			require.False(t, got.KeepPayload)
		}},
		{"retention 366 days", `{"task_type":"echo","retention_seconds":31622400}`, nil},
		{"no retention given", `{"task_type":"echo"}`, func(t *testing.T, got *dtqtype.TaskInfo) {
			require.Nil(t, got.RetentionSeconds)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, err := b.submitJSON(c.body)
			require.NoError(t, err)
			require.False(t, res.Duplicate)
			got, err := b.insp.GetTask(b.ctx, res.TaskID)
			require.NoError(t, err)
			require.Equal(t, now, got.CreatedAt.Time)
			require.Equal(t, res.Task.AvailableAt, got.AvailableAt)
			require.Equal(t, res.Task.ExpiresAt, got.ExpiresAt)
			require.Equal(t, res.Task.Status, got.Status)
			require.Equal(t, res.Task.RetentionSeconds, got.RetentionSeconds, "the answer shows what is stored")
			require.Equal(t, res.Task.KeepPayload, got.KeepPayload)
			if c.check != nil {
				c.check(t, got)
			}
		})
	}
}

func TestValidQueueName(t *testing.T) {
	t.Parallel()
	cases := map[string]bool{
		"default": true, "a": true, "0": true, "emails-eu_1": true, strings.Repeat("q", 64): true,
		"": false, "-a": false, "_a": false, "Emails": false, "a.b": false, "a:b": false, "a b": false,
		"a{b}": false, "#seq": false, "a\n": false, strings.Repeat("q", 65): false, "é": false,
	}
	for name, want := range cases {
		require.Equal(t, want, dtq.ValidQueueName(name), "%q", name)
	}
}
