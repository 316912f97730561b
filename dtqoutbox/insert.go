package dtqoutbox

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dtq-io/dtq"
)

// ErrInvalidSubmission is wrapped by Insert's refusals: a submission that
// cannot be written as a row (no type, a payload that is not a JSON object,
// a duration finer than the row's form holds). Everything else is checked
// by the relay, as for any submission; a row it refuses ends failed.
var ErrInvalidSubmission = errors.New("dtqoutbox: invalid submission")

// Insert writes s as a row of dtq_outbox inside tx and returns the row's
// id. The task is submitted by a relay once tx has committed; if tx rolls
// back, there is no row and never a task. The row's idempotency key is the
// submission's own IdempotencyKey, or "outbox:<id>" (RelayConfig.KeyPrefix).
func Insert(ctx context.Context, tx *sql.Tx, s dtq.Submission) (int64, error) {
	body, err := encode(&s)
	if err != nil {
		return 0, err
	}
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO dtq_outbox (submission) VALUES ($1) RETURNING id`, string(body)).Scan(&id); err != nil {
		return 0, fmt.Errorf("dtqoutbox: insert: %w", err)
	}
	return id, nil
}

// row is a submission as a row holds it: the JSON body of POST
// /api/v1/tasks (docs/http-api.md), so that programs in any language can
// write rows too.
type row struct {
	TaskType         string          `json:"task_type"`
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
}

// encode turns s into its row form.
func encode(s *dtq.Submission) ([]byte, error) {
	if s.Type == "" {
		return nil, fmt.Errorf("%w: Type is required", ErrInvalidSubmission)
	}
	r := row{TaskType: s.Type, Queue: s.Queue, Priority: s.Priority, MaxAttempts: s.MaxAttempts,
		IdempotencyKey: s.IdempotencyKey, ConcurrencyKey: s.ConcurrencyKey, KeepPayload: s.KeepPayload}
	var err error
	if r.Payload, err = object("Payload", s.Payload); err != nil {
		return nil, err
	}
	if r.Metadata, err = object("Metadata", s.Metadata); err != nil {
		return nil, err
	}
	if r.TimeoutMS, err = whole("Timeout", s.Timeout, time.Millisecond); err != nil {
		return nil, err
	}
	if s.RunAt.IsZero() {
		if r.DelayMS, err = whole("Delay", s.Delay, time.Millisecond); err != nil {
			return nil, err
		}
	} else {
		r.RunAt = s.RunAt.UTC().Format(time.RFC3339Nano)
	}
	if !s.ExpiresAt.IsZero() {
		r.ExpiresAt = s.ExpiresAt.UTC().Format(time.RFC3339Nano)
	} else if r.TTLSeconds, err = whole("TTL", s.TTL, time.Second); err != nil {
		return nil, err
	}
	switch {
	case s.Retention == dtq.NoRetention:
		r.RetentionSeconds = new(int64) // 0: kept for no time
	case s.Retention != 0:
		secs, err := whole("Retention", s.Retention, time.Second)
		if err != nil {
			return nil, err
		}
		r.RetentionSeconds = &secs
	}
	return json.Marshal(r)
}

// object marshals v (nil: none) and requires a JSON object.
func object(field string, v any) (json.RawMessage, error) {
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
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalidSubmission, field, err)
		}
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return nil, fmt.Errorf("%w: %s must be a JSON object", ErrInvalidSubmission, field)
	}
	return b, nil
}

// whole is d in units, refusing a negative d or one with a remainder.
func whole(field string, d, unit time.Duration) (int64, error) {
	if d < 0 || d%unit != 0 {
		return 0, fmt.Errorf("%w: %s must be a non-negative whole number of %v", ErrInvalidSubmission, field, unit)
	}
	return int64(d / unit), nil
}
