package wire

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/dtq-io/dtq"
)

// submissionBody is the JSON form of a submission as EncodeSubmission
// writes it: the body of POST /api/v1/tasks (docs/http-api.md).
type submissionBody struct {
	TaskType         string          `json:"task_type,omitempty"`
	Queue            string          `json:"queue,omitempty"`
	Payload          json.RawMessage `json:"payload,omitempty"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	Priority         *int            `json:"priority,omitempty"`
	MaxAttempts      int             `json:"max_attempts,omitempty"`
	TimeoutMS        int64           `json:"timeout_ms,omitempty"`
	DelayMS          int64           `json:"delay_ms,omitempty"`
	RunAt            string          `json:"run_at,omitempty"`
	ExpiresAt        string          `json:"expires_at,omitempty"`
	TTLSeconds       int64           `json:"ttl_seconds,omitempty"`
	IdempotencyKey   string          `json:"idempotency_key,omitempty"`
	ConcurrencyKey   string          `json:"concurrency_key,omitempty"`
	RetentionSeconds *int64          `json:"retention_seconds,omitempty"`
	KeepPayload      bool            `json:"keep_payload,omitempty"`
	Dedup            *dedupBody      `json:"dedup,omitempty"`
}

// dedupBody is a submission's dedup object (docs/deduplication.md).
type dedupBody struct {
	Key     string   `json:"key,omitempty"`
	By      []string `json:"by,omitempty"`
	Mode    string   `json:"mode"`
	TTL     string   `json:"ttl,omitempty"`
	Window  string   `json:"window,omitempty"`
	MaxWait string   `json:"max_wait,omitempty"`
}

// EncodeSubmission writes s in the JSON form DecodeSubmission reads (the
// body of POST /api/v1/tasks), every field of s included: decoding the
// result gives s back, with Payload and Metadata as json.RawMessage. It
// checks only what the form cannot hold, as a *dtq.ValidationError naming
// the field: a Payload or Metadata that is not a JSON object, a negative
// duration, or one finer than its field's unit (milliseconds for
// timeout_ms and delay_ms, seconds for ttl_seconds and retention_seconds).
// Everything else is validated where the submission is submitted.
func EncodeSubmission(s *dtq.Submission) ([]byte, error) {
	b := submissionBody{TaskType: s.Type, Queue: s.Queue, Priority: s.Priority, MaxAttempts: s.MaxAttempts,
		IdempotencyKey: s.IdempotencyKey, ConcurrencyKey: s.ConcurrencyKey, KeepPayload: s.KeepPayload}
	var err error
	if b.Payload, err = objectBytes("payload", s.Payload); err != nil {
		return nil, err
	}
	if b.Metadata, err = objectBytes("metadata", s.Metadata); err != nil {
		return nil, err
	}
	if b.TimeoutMS, err = wholeUnits("timeout_ms", s.Timeout, time.Millisecond); err != nil {
		return nil, err
	}
	// Delay and TTL are written even beside RunAt and ExpiresAt, which
	// override them, so that the form loses nothing.
	if b.DelayMS, err = wholeUnits("delay_ms", s.Delay, time.Millisecond); err != nil {
		return nil, err
	}
	if b.TTLSeconds, err = wholeUnits("ttl_seconds", s.TTL, time.Second); err != nil {
		return nil, err
	}
	if !s.RunAt.IsZero() {
		b.RunAt = s.RunAt.UTC().Format(time.RFC3339Nano)
	}
	if !s.ExpiresAt.IsZero() {
		b.ExpiresAt = s.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	switch {
	case s.Retention == dtq.NoRetention:
		b.RetentionSeconds = new(int64) // 0: kept for no time
	case s.Retention != 0:
		secs, err := wholeUnits("retention_seconds", s.Retention, time.Second)
		if err != nil {
			return nil, err
		}
		b.RetentionSeconds = &secs
	}
	if d := s.Dedup; d != nil {
		b.Dedup = &dedupBody{Key: d.Key, By: d.By, Mode: string(d.Mode)}
		for _, x := range []struct {
			field string
			d     time.Duration
			to    *string
		}{{"dedup.ttl", d.TTL, &b.Dedup.TTL}, {"dedup.window", d.Window, &b.Dedup.Window}, {"dedup.max_wait", d.MaxWait, &b.Dedup.MaxWait}} {
			if x.d < 0 {
				return nil, invalid(x.field, "must not be negative")
			}
			if x.d > 0 {
				*x.to = x.d.String() // exact: time.ParseDuration reads it back to the nanosecond
			}
		}
	}
	return json.Marshal(b)
}

// objectBytes is v (nil: none) as JSON, which must be an object.
func objectBytes(field string, v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	case []byte:
		b = x
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, invalid(field, "cannot be written as JSON: %v", err)
		}
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, invalid(field, "must be a JSON object")
	}
	return b, nil
}

// wholeUnits is d in units, refusing a negative d or one with a remainder.
func wholeUnits(field string, d, unit time.Duration) (int64, error) {
	if d < 0 || d%unit != 0 {
		return 0, invalid(field, "must be a non-negative whole number of %v, not %v", unit, d)
	}
	return int64(d / unit), nil
}
