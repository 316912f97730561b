// Package dtqoutbox submits dtq tasks from inside a PostgreSQL
// transaction: the transactional outbox pattern, made exactly-once by dtq's
// idempotency keys.
//
// Insert writes a row into the dtq_outbox table inside the caller's
// transaction, next to the business rows it belongs with; the row, and so
// the task, exists if and only if the transaction commits. A Relay (in any
// process: the dtq binary's `dtq outbox relay`, or a goroutine of a worker)
// submits committed rows through the normal submission path with the
// idempotency key "outbox:<id>:<key_nonce>" (or the row's own key) and then marks them
// sent with their task id. A relay that dies between the two steps leaves
// the row to be submitted again, which the key maps to the same task.
//
//	tx, _ := db.BeginTx(ctx, nil)
//	_, _ = tx.ExecContext(ctx, `INSERT INTO orders (id, total) VALUES ($1, $2)`, id, total)
//	_, _ = dtqoutbox.Insert(ctx, tx, dtq.Submission{Type: "send_receipt", Payload: map[string]any{"order_id": id}})
//	_ = tx.Commit() // the order and its task, or neither
//
// The promise and its limits (the idempotency window above all) are in
// docs/outbox.md. The package talks to PostgreSQL through database/sql; the
// pgx driver's stdlib registration ("pgx") is what it is tested with and
// what LISTEN/NOTIFY wake-ups need. It is a module of its own: neither the
// dtq library nor its other packages import it.
package dtqoutbox
