package dtq

// A submission's JSON form is dtq's wire form: the body of POST
// /api/v1/tasks, a dtqoutbox row, what the dtq command sends. One codec,
// Submission's MarshalJSON and UnmarshalJSON, writes and reads it for all
// of them (docs/architecture.md, "The submission's JSON form").

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-io/dtq/internal/jsonscan"
)

// ErrInvalidJSON is wrapped by Submission.UnmarshalJSON when its input is
// not a JSON object at all (the HTTP API answers 400 INVALID_REQUEST rather
// than INVALID_TASK).
var ErrInvalidJSON = errors.New("dtq: not a JSON object")

// UnmarshalJSON reads s from its JSON form, the form MarshalJSON writes
// (docs/http-api.md, "Submit a task"), replacing every field of s. Payload
// and Metadata become json.RawMessage. A field that cannot be read is a
// *ValidationError naming it: explicit values outside a field's range are
// errors even where the Go zero value would mean "default" (e.g.
// "timeout_ms": 0), and unknown fields are errors so that a misspelt option
// is never silently ignored. Input that is not a JSON object at all (null
// included, or one nested deeper than MaxJSONDepth) wraps ErrInvalidJSON,
// with the line and column of a syntax error. The rest is checked by Submit.
func (s *Submission) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	// The body adds one level around payload and metadata, whose own depth
	// is checked per field so the error can name the field; one more level of
	// slack lets that per-field check report a payload just over the limit.
	if d := jsonscan.Depth(data); d > MaxJSONDepth+2 {
		return fmt.Errorf("%w: nests %d levels deep; the limit is %d", ErrInvalidJSON, d, MaxJSONDepth)
	}
	var m map[string]json.RawMessage
	if len(data) == 0 || data[0] != '{' {
		return fmt.Errorf("%w: expected an object like {\"task_type\": \"echo\", \"payload\": {}}", ErrInvalidJSON)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("%w: %s", ErrInvalidJSON, syntaxPosition(data, err))
	}
	v, err := submissionFromFields(m)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// syntaxPosition describes a JSON decoding error with where it happened
// (line and column, counted from 1), so that a stray comma can be found.
func syntaxPosition(data []byte, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return "expected an object like {\"task_type\": \"echo\", \"payload\": {}}"
	}
	off := min(max(int(se.Offset)-1, 0), len(data))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - bytes.LastIndexByte(data[:off], '\n')
	msg := strings.TrimPrefix(se.Error(), "json: ")
	return fmt.Sprintf("not valid JSON at line %d, column %d (byte %d): %s", line, col, off+1, msg)
}

// submissionFromFields reads a submission from its JSON form's fields.
func submissionFromFields(m map[string]json.RawMessage) (Submission, error) {
	var s Submission
	for field, raw := range m {
		if string(raw) == "null" && field != "payload" && field != "metadata" {
			continue
		}
		var err error
		switch field {
		case "task_type":
			s.Type, err = jsonString(field, raw)
		case "queue":
			s.Queue, err = jsonString(field, raw)
			if err == nil && s.Queue == "" {
				err = invalid(field, "must not be empty")
			}
		case "idempotency_key":
			s.IdempotencyKey, err = jsonString(field, raw)
			if err == nil && s.IdempotencyKey == "" {
				err = invalid(field, "must be 1..255 characters")
			}
		case "concurrency_key":
			s.ConcurrencyKey, err = jsonString(field, raw)
			if err == nil && s.ConcurrencyKey == "" {
				err = invalid(field, "must be 1..128 characters")
			}
		case "payload":
			s.Payload = raw
		case "metadata":
			s.Metadata = raw
		case "priority":
			var p int64
			p, err = jsonInt(field, raw, 0, 9)
			s.Priority = new(int(p))
		case "max_attempts":
			var v int64
			v, err = jsonInt(field, raw, 1, math.MaxInt32)
			s.MaxAttempts = int(v)
		case "timeout_ms":
			var v int64
			v, err = jsonInt(field, raw, 1, MaxTimeout.Milliseconds())
			s.Timeout = time.Duration(v) * time.Millisecond
		case "delay_ms":
			var v int64
			v, err = jsonInt(field, raw, 0, MaxDelay.Milliseconds())
			s.Delay = time.Duration(v) * time.Millisecond
		case "ttl_seconds":
			var v int64
			v, err = jsonInt(field, raw, 1, math.MaxInt32)
			s.TTL = time.Duration(v) * time.Second
		case "retention_seconds":
			var v int64
			v, err = jsonInt(field, raw, 0, int64(MaxRetention/time.Second))
			s.Retention = time.Duration(v) * time.Second
			if v == 0 {
				s.Retention = NoRetention
			}
		case "keep_payload":
			if err = json.Unmarshal(raw, &s.KeepPayload); err != nil {
				err = invalid(field, "must be true or false")
			}
		case "dedup":
			s.Dedup, err = jsonDedup(raw)
		case "run_at":
			s.RunAt, err = jsonTime(field, raw)
		case "expires_at":
			s.ExpiresAt, err = jsonTime(field, raw)
		default:
			name := field
			if name == "" {
				name = "(empty name)"
			}
			err = invalid(name, "is not a known field")
		}
		if err != nil {
			return Submission{}, err
		}
	}
	return s, nil
}

func jsonString(field string, raw json.RawMessage) (string, error) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", invalid(field, "must be a string")
	}
	return v, nil
}

func jsonInt(field string, raw json.RawMessage, lo, hi int64) (int64, error) {
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, invalid(field, "must be an integer between %d and %d", lo, hi)
	}
	return v, nil
}

func jsonTime(field string, raw json.RawMessage) (time.Time, error) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return time.Time{}, invalid(field, "must be an RFC 3339 time string like 2026-01-02T15:04:05.000Z")
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalid(field, "must be an RFC 3339 time string like 2026-01-02T15:04:05.000Z")
	}
	return t, nil
}

// jsonDedup reads a submission's dedup object (docs/deduplication.md):
// {"key" or "by", "mode", "ttl", "window", "max_wait"}, durations as Go
// duration strings ("5s", "10m"). The values are checked by Submit.
func jsonDedup(raw json.RawMessage) (*Dedup, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, invalid("dedup", `must be an object like {"key": "doc-42", "mode": "drop"}`)
	}
	d := &Dedup{}
	for field, v := range m {
		name := "dedup." + field
		var err error
		switch field {
		case "key":
			d.Key, err = jsonString(name, v)
			if err == nil && d.Key == "" {
				err = invalid(name, "must be 1..256 printable characters")
			}
		case "by":
			if json.Unmarshal(v, &d.By) != nil || len(d.By) == 0 {
				err = invalid(name, `must be a non-empty array of paths like ["payload.user_id", "task_type"]`)
			}
		case "mode":
			var mode string
			mode, err = jsonString(name, v)
			d.Mode = DedupMode(mode)
		case "ttl", "window", "max_wait":
			var dur time.Duration
			dur, err = jsonDuration(name, v)
			switch field {
			case "ttl":
				d.TTL = dur
			case "window":
				d.Window = dur
			default:
				d.MaxWait = dur
			}
		default:
			err = invalid(name, "is not a known field (key, by, mode, ttl, window, max_wait)")
		}
		if err != nil {
			return nil, err
		}
	}
	if d.Mode == "" {
		return nil, invalid("dedup.mode", "is required: drop, throttle, debounce, replace or keep_last")
	}
	return d, nil
}

// jsonDuration reads a positive duration string such as "5s" or "10m".
func jsonDuration(field string, raw json.RawMessage) (time.Duration, error) {
	var v string
	if err := json.Unmarshal(raw, &v); err == nil {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d, nil
		}
	}
	return 0, invalid(field, `must be a positive duration like "500ms", "5s" or "10m"`)
}

// submissionBody is the JSON form of a submission as MarshalJSON
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

// MarshalJSON writes s in its JSON form, the body of POST /api/v1/tasks
// (docs/http-api.md), every field of s included: UnmarshalJSON gives s
// back, with Payload and Metadata as json.RawMessage. It checks only what
// the form cannot hold, as a *ValidationError naming the field: a Payload
// or Metadata that is not a JSON object, a negative duration, or one finer
// than its field's unit (milliseconds for timeout_ms and delay_ms, seconds
// for ttl_seconds and retention_seconds). Everything else is validated
// where the submission is submitted. (json.Marshal wraps the error in a
// *json.MarshalerError; errors.As finds the *ValidationError in it.)
func (s Submission) MarshalJSON() ([]byte, error) {
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
	case s.Retention == NoRetention:
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
	out, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("dtq: writing a submission: %w", err)
	}
	return out, nil
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
