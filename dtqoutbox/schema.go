package dtqoutbox

import (
	"context"
	"database/sql"
	"fmt"
)

// Channel is the LISTEN/NOTIFY channel the table's insert trigger notifies
// and relays listen on.
const Channel = "dtq_outbox"

// migrateLock is the advisory lock Migrate holds, so that relays started
// together do not race on CREATE.
const migrateLock = 7_262_881_034

// schema creates the outbox table, its indexes and the notify trigger in
// the connection's current schema (search_path). Every statement may run
// again on an existing table.
//
// Columns: the submission as sent (jsonb, the HTTP API's submission body),
// created_at; sent_at and task_id once the task exists; claimed_until (a
// relay's lease on the row while it submits it), first_claimed_at (when a
// relay first handed it to dtq: past the idempotency window a row not
// marked sent is not submitted again), attempts and last_error; failed_at
// when the row will not be submitted (an invalid submission, an unknown
// outcome past the window): rows that need a person. key_nonce is the
// secret part of the row's idempotency key (see Relay.key).
var schema = []string{
	`CREATE TABLE IF NOT EXISTS dtq_outbox (
		id               bigserial PRIMARY KEY,
		submission       jsonb NOT NULL,
		created_at       timestamptz NOT NULL DEFAULT now(),
		sent_at          timestamptz,
		task_id          text,
		claimed_until    timestamptz,
		first_claimed_at timestamptz,
		attempts         integer NOT NULL DEFAULT 0,
		last_error       text,
		failed_at        timestamptz
	)`,
	// Added without a default first, so that rows written before the
	// column existed keep NULL: they may have been submitted already under
	// the key "<prefix>:<id>", which they keep. Rows written since get 122
	// random bits (gen_random_uuid is core since PostgreSQL 13).
	`ALTER TABLE dtq_outbox ADD COLUMN IF NOT EXISTS key_nonce text`,
	`ALTER TABLE dtq_outbox ALTER COLUMN key_nonce SET DEFAULT replace(gen_random_uuid()::text, '-', '')`,
	// The relays' work: rows neither sent nor failed, oldest first.
	`CREATE INDEX IF NOT EXISTS dtq_outbox_pending ON dtq_outbox (id) WHERE sent_at IS NULL AND failed_at IS NULL`,
	// Pruning of sent rows past the retention.
	`CREATE INDEX IF NOT EXISTS dtq_outbox_sent ON dtq_outbox (sent_at) WHERE sent_at IS NOT NULL`,
	`CREATE OR REPLACE FUNCTION dtq_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		PERFORM pg_notify('` + Channel + `', '');
		RETURN NULL;
	END $$`,
	// One notification per inserting statement, delivered at commit (never
	// for a transaction that rolled back); rows written by any program wake
	// the relays, not only Insert's.
	`CREATE OR REPLACE TRIGGER dtq_outbox_notify AFTER INSERT ON dtq_outbox
		FOR EACH STATEMENT EXECUTE FUNCTION dtq_outbox_notify()`,
}

// Migrate creates the dtq_outbox table, its indexes and its notify trigger
// if they do not exist (PostgreSQL 14 or later). Running it again, or from
// several processes at once, is fine.
func Migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dtqoutbox: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
		return fmt.Errorf("dtqoutbox: migrate: lock: %w", err)
	}
	for _, stmt := range schema {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("dtqoutbox: migrate: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dtqoutbox: migrate: %w", err)
	}
	return nil
}
