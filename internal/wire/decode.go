// Package wire reads what the HTTP API receives into the library's types:
// the JSON bodies of a submission (POST /api/v1/tasks) and a schedule (PUT
// /api/v1/schedules/{name}), and the Idempotency-Key header. Refusals are
// *dtq.ValidationError naming the field, or wrap ErrInvalidJSON for a body
// that is not a JSON object at all.
package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/jsonscan"
)

// ErrInvalidJSON is wrapped by DecodeSubmission when the body is not a JSON
// object at all (HTTP 400 INVALID_REQUEST rather than INVALID_TASK).
var ErrInvalidJSON = errors.New("dtq: request body is not a JSON object")

// DecodeSubmission parses the JSON form of a submission (the body of POST
// /api/v1/tasks). Explicit values outside a field's range are errors even
// where the Go zero value would mean "default" (e.g. "timeout_ms": 0); unknown
// fields are errors so a misspelt option is never silently ignored.
func DecodeSubmission(data []byte) (dtq.Submission, error) {
	var s dtq.Submission
	data = bytes.TrimSpace(data)
	// The body adds one level around payload and metadata, whose own depth
	// is checked per field so the error can name the field; one more level of
	// slack lets that per-field check report a payload just over the limit.
	if d := jsonscan.Depth(data); d > dtq.MaxJSONDepth+2 {
		return s, fmt.Errorf("%w: nests %d levels deep; the limit is %d", ErrInvalidJSON, d, dtq.MaxJSONDepth)
	}
	var m map[string]json.RawMessage
	if len(data) == 0 || data[0] != '{' {
		return s, fmt.Errorf("%w: expected an object like {\"task_type\": \"echo\", \"payload\": {}}", ErrInvalidJSON)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return s, fmt.Errorf("%w: %s", ErrInvalidJSON, syntaxPosition(data, err))
	}
	return submissionFromFields(m)
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

func submissionFromFields(m map[string]json.RawMessage) (dtq.Submission, error) {
	var s dtq.Submission
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
			v, err = jsonInt(field, raw, 1, dtq.MaxTimeout.Milliseconds())
			s.Timeout = time.Duration(v) * time.Millisecond
		case "delay_ms":
			var v int64
			v, err = jsonInt(field, raw, 0, dtq.MaxDelay.Milliseconds())
			s.Delay = time.Duration(v) * time.Millisecond
		case "ttl_seconds":
			var v int64
			v, err = jsonInt(field, raw, 1, math.MaxInt32)
			s.TTL = time.Duration(v) * time.Second
		case "retention_seconds":
			var v int64
			v, err = jsonInt(field, raw, 0, int64(dtq.MaxRetention/time.Second))
			s.Retention = time.Duration(v) * time.Second
			if v == 0 {
				s.Retention = dtq.NoRetention
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
			return dtq.Submission{}, err
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
func jsonDedup(raw json.RawMessage) (*dtq.Dedup, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, invalid("dedup", `must be an object like {"key": "doc-42", "mode": "drop"}`)
	}
	d := &dtq.Dedup{}
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
			d.Mode = dtq.DedupMode(mode)
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
