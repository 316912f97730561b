package dtqoutbox

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// TestAClientCannotClaimARowsKey: a producer that submits other work under
// the key a row would have had ("outbox:<id>", ids being a sequence), and
// under the key of the row after, before any relay ran, cannot make the
// row end failed: the row's key holds a nonce no client can know yet.
func TestAClientCannotClaimARowsKey(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	tx, err := g.db.db.BeginTx(g.ctx, nil)
	require.NoError(t, err)
	id, err := Insert(g.ctx, tx, dtq.Submission{Queue: "outbox", Type: "job", Payload: map[string]any{"row": 1}})
	require.NoError(t, err)
	for _, key := range []string{fmt.Sprintf("outbox:%d", id), fmt.Sprintf("outbox:%d:", id)} {
		_, err := g.client.Submit(g.ctx, dtq.Submission{Queue: "outbox", Type: "job", IdempotencyKey: key,
			Payload: map[string]any{"row": "stolen"}})
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	g.relay(t, nil)
	g.settled(t)
	var taskID, nonce string
	require.NoError(t, g.db.db.QueryRow(`SELECT task_id, key_nonce FROM dtq_outbox WHERE id = $1 AND sent_at IS NOT NULL`, id).
		Scan(&taskID, &nonce), "the row was sent, not failed")
	ti, err := g.insp.GetTask(g.ctx, taskID)
	require.NoError(t, err)
	require.JSONEq(t, `{"row":1}`, string(ti.Payload), "the row's task is its own")
	require.Equal(t, fmt.Sprintf("outbox:%d:%s", id, nonce), *ti.IdempotencyKey)
}

// TestRowsWithoutANonceKeepTheirKey: a row written before the table had
// key_nonce (Migrate adds the column empty for existing rows) may have been
// submitted by an earlier relay under "outbox:<id>"; it keeps that key, so
// submitting it again replays that task instead of making a second one.
func TestRowsWithoutANonceKeepTheirKey(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	old := g.insert(t, 1, true)
	_, err := g.db.db.Exec(`UPDATE dtq_outbox SET key_nonce = NULL, first_claimed_at = now(), attempts = 1 WHERE id = $1`, old)
	require.NoError(t, err)
	// What the earlier relay submitted before it died.
	first, err := g.client.Submit(g.ctx, dtq.Submission{Queue: "outbox", Type: "job", IdempotencyKey: fmt.Sprintf("outbox:%d", old),
		Payload: json.RawMessage(`{"row":1}`)})
	require.NoError(t, err)
	g.relay(t, nil)
	g.settled(t)
	var taskID string
	require.NoError(t, g.db.db.QueryRow(`SELECT task_id FROM dtq_outbox WHERE id = $1 AND sent_at IS NOT NULL`, old).Scan(&taskID))
	require.Equal(t, first.TaskID, taskID, "the row maps to the task its key already had")
	q, err := g.insp.GetQueue(g.ctx, "outbox")
	require.NoError(t, err)
	require.EqualValues(t, 1, q.Depth, "no second task")
}

// TestMigrateLeavesExistingRowsWithoutANonce: the column is added empty
// for rows already in the table; rows written after it get a nonce.
func TestMigrateLeavesExistingRowsWithoutANonce(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	_, err := d.db.Exec(`ALTER TABLE dtq_outbox DROP COLUMN key_nonce`) // the table as an earlier version made it
	require.NoError(t, err)
	_, err = d.db.Exec(`INSERT INTO dtq_outbox (submission) VALUES ('{"task_type":"job"}')`)
	require.NoError(t, err)
	require.NoError(t, Migrate(t.Context(), d.db))
	_, err = d.db.Exec(`INSERT INTO dtq_outbox (submission) VALUES ('{"task_type":"job"}')`)
	require.NoError(t, err)
	rows, err := d.db.Query(`SELECT key_nonce FROM dtq_outbox ORDER BY id`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	var nonces []*string
	for rows.Next() {
		var n *string
		require.NoError(t, rows.Scan(&n))
		nonces = append(nonces, n)
	}
	require.NoError(t, rows.Err())
	require.Len(t, nonces, 2)
	require.Nil(t, nonces[0], "the earlier row keeps its key")
	require.NotNil(t, nonces[1])
	require.Regexp(t, `^[0-9a-f]{32}$`, *nonces[1])
}

// TestRelayOnAnOlderTableSaysToMigrate: a relay on a table an earlier
// version made (no key_nonce) says what to run, and takes nothing.
func TestRelayOnAnOlderTableSaysToMigrate(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	g.insert(t, 1, true)
	_, err := g.db.db.Exec(`ALTER TABLE dtq_outbox DROP COLUMN key_nonce`)
	require.NoError(t, err)
	r, err := NewRelay(&RelayConfig{DB: g.db.db, Client: g.client})
	require.NoError(t, err)
	_, err = r.pass(g.ctx)
	require.ErrorContains(t, err, "run dtq outbox migrate")
	var claimed bool
	require.NoError(t, g.db.db.QueryRow(`SELECT first_claimed_at IS NOT NULL FROM dtq_outbox`).Scan(&claimed))
	require.False(t, claimed)
}

func TestNewRelayChecksTheKeyPrefix(t *testing.T) {
	t.Parallel()
	g := &RelayConfig{DB: &sql.DB{}, Client: &dtq.Client{}}
	for _, c := range []struct {
		prefix string
		ok     bool
	}{{"", true}, {"shop-db", true}, {strings.Repeat("p", 128), true}, {strings.Repeat("p", 129), false}, {"tab\t", false}} {
		cfg := *g
		cfg.KeyPrefix = c.prefix
		_, err := NewRelay(&cfg)
		if c.ok {
			require.NoError(t, err, "%q", c.prefix)
		} else {
			require.ErrorContains(t, err, "KeyPrefix must be 1..128 printable ASCII characters", "%q", c.prefix)
		}
	}
}
