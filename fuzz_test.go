package dtq_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// FuzzDecodeSubmission feeds arbitrary bodies to Submission.UnmarshalJSON and then
// submits what it accepts to a real Redis. Every refusal must be a field
// error or ErrInvalidJSON (never a panic, never a Redis error), and every
// accepted submission must be stored.
func FuzzDecodeSubmission(f *testing.F) {
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	for _, seed := range []string{
		``, `{}`, `[]`, `null`, `"x"`, `{`, `{"task_type":"echo"}`,
		`{"task_type":"echo","payload":{"a":[1,2,{"b":null}]},"queue":"emails","priority":9}`,
		`{"task_type":"echo","payload":[1]}`,
		`{"task_type":"echo","payload":null,"metadata":null}`,
		`{"task_type":"echo","priority":10}`,
		`{"task_type":"echo","priority":1e1}`,
		`{"task_type":"echo","max_attempts":0,"timeout_ms":0}`,
		`{"task_type":"echo","delay_ms":31536000000}`,
		`{"task_type":"echo","run_at":"` + soon + `","expires_at":"` + soon + `"}`,
		`{"task_type":"echo","run_at":"0001-01-01T00:00:00Z"}`,
		`{"task_type":"echo","expires_at":"9999-12-31T23:59:59.999Z"}`,
		`{"task_type":"echo","ttl_seconds":2147483647,"metadata":{"ttl_seconds":5}}`,
		`{"task_type":"echo","metadata":{"ttl_seconds":"5"}}`,
		`{"task_type":"echo","idempotency_key":"\"a\\\"b\""}`,
		`{"task_type":"echo","idempotency_key":"\"\\x\""}`,
		`{"task_type":"echo","idempotency_key":"{q}:x"}`,
		`{"task_type":"echo","unknown":1}`,
		`{"task_type":"echo","payload":{"s":"\u0000\ud800"}}`,
		`{"task_type":"echo","payload":{"a":1,"a":2}}`,
		`{"task_type":"echo","payload":{"n":123456789012345678901234567890}}`,
		`{"task_type":"echo","payload":{"s":"]]]]}}}}"}}`,
		`{"task_type":"echo"}{}`,
		"\xef\xbb\xbf{\"task_type\":\"echo\"}",
		"{\"task_type\":\"echo\",\"payload\":{\"s\":\"\xff\"}}",
	} {
		f.Add([]byte(seed))
	}

	s := redistest.New(f)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte) {
		var sub dtq.Submission
		if err := sub.UnmarshalJSON(body); err != nil {
			requireRefusal(t, err, true)
			return
		}
		// A prefix per input, so that inputs never meet through idempotency
		// keys or depth.
		prefix := fmt.Sprintf("%s-fz%d", s.Prefix, n.Add(1))
		c, err := openPrefix(t, s.Client, prefix).NewClient(nil)
		require.NoError(t, err)
		defer cleanKeys(t, s, prefix)
		res, err := c.Submit(t.Context(), sub)
		if err != nil {
			requireRefusal(t, err, false)
			return
		}
		require.False(t, res.Duplicate)
		_, ok := rdb.ParseTaskID(res.TaskID)
		require.True(t, ok, res.TaskID)
		require.True(t, json.Valid(res.Task.Payload), "%q", res.Task.Payload)
		require.Equal(t, byte('{'), res.Task.Payload[0])
		require.True(t, json.Valid(res.Task.Metadata), "%q", res.Task.Metadata)
		if !res.Task.ExpiresAt.IsZero() {
			require.True(t, res.Task.ExpiresAt.After(res.Task.AvailableAt.Time))
		}
		stored, err := rdb.New(s.Client, prefix).GetTask(t.Context(), res.TaskID)
		require.NoError(t, err)
		require.Equal(t, string(res.Task.Payload), string(stored.Payload))
	})
}

// requireRefusal checks that err is a refusal the API maps to a 400/413:
// a *ValidationError, or (from decoding only) ErrInvalidJSON.
func requireRefusal(t *testing.T, err error, decoding bool) {
	t.Helper()
	var ve *dtq.ValidationError
	if errors.As(err, &ve) {
		require.True(t, errors.Is(err, dtq.ErrInvalidTask) || errors.Is(err, dtq.ErrPayloadTooLarge) ||
			errors.Is(err, dtq.ErrUnknownTaskType), "%v", err)
		return
	}
	require.True(t, decoding && errors.Is(err, dtq.ErrInvalidJSON), "unexpected error: %v", err)
}

func cleanKeys(t *testing.T, s *redistest.Setup, prefix string) {
	keys, err := redistest.Keys(t.Context(), s.Admin, prefix)
	require.NoError(t, err)
	if len(keys) > 0 {
		require.NoError(t, s.Client.Del(t.Context(), keys...).Err())
	}
}
