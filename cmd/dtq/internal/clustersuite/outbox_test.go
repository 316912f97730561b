package clustersuite_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqoutbox"
)

// TestOutboxRelayOnCluster: committed outbox rows for queues on every
// master become one task each through a relay on a Cluster client, rolled
// back rows none; a second relay pass finds nothing to send.
func TestOutboxRelayOnCluster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("outbox")
	ctx := context.Background()
	db := outboxSchema(t)
	require.NoError(t, dtqoutbox.Migrate(ctx, db))
	dep := openDeployment(t, cc, prefix)
	client, err := dep.NewClient(nil)
	require.NoError(t, err)
	insp := dep.Inspector()

	queues := queuesOnEveryMaster(t, c, prefix)
	want := map[string]int{}
	for i := range 30 {
		q := queues[i%len(queues)]
		tx, err := db.BeginTx(ctx, nil)
		require.NoError(t, err)
		_, err = dtqoutbox.Insert(ctx, tx, dtq.Submission{Queue: q, Type: "job", Payload: map[string]any{"row": i}})
		require.NoError(t, err)
		if i%5 == 4 {
			require.NoError(t, tx.Rollback())
			continue
		}
		require.NoError(t, tx.Commit())
		want[q]++
	}
	relay, err := dtqoutbox.NewRelay(&dtqoutbox.RelayConfig{DB: db, Client: client, BatchSize: 7, PollInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	defer func() { stop(); require.NoError(t, <-done) }()
	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, db.QueryRow(`SELECT count(*) FROM dtq_outbox WHERE sent_at IS NULL`).Scan(&pending))
		return pending == 0
	}, 30*time.Second, 10*time.Millisecond, "rows still pending")

	rows, err := db.Query(`SELECT id, submission->>'queue', task_id, key_nonce FROM dtq_outbox ORDER BY id`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	n := 0
	for rows.Next() {
		var id int64
		var q, taskID, nonce string
		require.NoError(t, rows.Scan(&id, &q, &taskID, &nonce))
		ti, err := insp.GetTask(ctx, taskID)
		require.NoError(t, err)
		require.Equal(t, q, ti.Queue)
		require.Equal(t, fmt.Sprintf("outbox:%d:%s", id, nonce), *ti.IdempotencyKey)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 24, n, "one row per committed transaction")
	for _, q := range queues {
		qi, err := insp.GetQueue(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, want[q], qi.Depth, "queue %s holds one task per committed row", q)
	}
}

// outboxSchema is a schema of its own on the test PostgreSQL
// (DTQ_TEST_POSTGRES_URL, default the loopback server CI runs), dropped
// when the test ends.
func outboxSchema(t *testing.T) *sql.DB {
	t.Helper()
	base := os.Getenv("DTQ_TEST_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	admin, err := sql.Open("pgx", base)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.Ping(), "the outbox tests need PostgreSQL at %s (DTQ_TEST_POSTGRES_URL)", base)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "dtq_cluster_" + hex.EncodeToString(b)
	_, err = admin.Exec(`CREATE SCHEMA ` + schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`) })
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}
