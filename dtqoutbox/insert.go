package dtqoutbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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
// submission's own IdempotencyKey, or "outbox:<id>:<nonce>"
// (RelayConfig.KeyPrefix), the nonce a random part of the row that no
// other producer can know before the relay uses the key.
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

// encode turns s into its row form: the submission's JSON form, the body
// of POST /api/v1/tasks (docs/http-api.md), written by the one codec the
// HTTP API and the relay read it with (dtq.Submission's MarshalJSON), so
// that every field of s is kept and programs in any language can write
// rows too.
func encode(s *dtq.Submission) ([]byte, error) {
	if s.Type == "" {
		return nil, fmt.Errorf("%w: Type is required", ErrInvalidSubmission)
	}
	b, err := s.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSubmission, err)
	}
	return b, nil
}
