package dtqoutbox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// TestOversizedRowsAreNotRead: rows whose submission is longer than the
// relay reads (twice the payload limit and 64 KiB by default) never come
// out of the database whole: a pass gets their ids and sizes only, and
// they end failed at once, saying why, while the rows beside them are sent.
func TestOversizedRowsAreNotRead(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	const limit = 2*dtq.DefaultMaxPayloadBytes + 64<<10
	tx, err := g.db.db.BeginTx(g.ctx, nil)
	require.NoError(t, err)
	big := map[int64]bool{}
	for i := range 20 {
		id, err := Insert(g.ctx, tx, dtq.Submission{Queue: "outbox", Type: "job",
			Payload: map[string]any{"blob": strings.Repeat("x", limit+i)}})
		require.NoError(t, err)
		big[id] = true
	}
	good, err := Insert(g.ctx, tx, dtq.Submission{Queue: "outbox", Type: "job", Payload: map[string]any{"row": 1}})
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	r, err := NewRelay(&RelayConfig{DB: g.db.db, Client: g.client})
	require.NoError(t, err)
	rows, err := r.take(g.ctx)
	require.NoError(t, err)
	require.Len(t, rows, 21)
	for _, row := range rows {
		require.LessOrEqual(t, len(row.body), limit, "row %d came out whole", row.id)
		require.Equal(t, !big[row.id], row.body != nil, "row %d", row.id)
	}
	_, err = g.db.db.Exec(`UPDATE dtq_outbox SET claimed_until = NULL`) // as if the lease had ended
	require.NoError(t, err)

	g.relay(t, nil)
	g.settled(t)
	q, err := g.db.db.Query(`SELECT id, sent_at IS NOT NULL, coalesce(last_error, ''), attempts FROM dtq_outbox ORDER BY id`)
	require.NoError(t, err)
	defer func() { _ = q.Close() }()
	for q.Next() {
		var id int64
		var sent bool
		var msg string
		var attempts int
		require.NoError(t, q.Scan(&id, &sent, &msg, &attempts))
		require.Equal(t, id == good, sent, "row %d", id)
		if big[id] {
			require.Contains(t, msg, "bytes of JSON, over the 589824 the relay reads (RelayConfig.MaxRowBytes")
			require.Equal(t, 2, attempts, "row %d ended failed at its first pass", id)
		}
	}
	require.NoError(t, q.Err())
}
