package cli

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqoutbox"
	"github.com/dtq-io/dtq/internal/redistest"
)

// outboxURL is a schema of its own on the test PostgreSQL
// (DTQ_TEST_POSTGRES_URL, default the loopback server CI runs), dropped
// when the test ends.
func outboxURL(t *testing.T) string {
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
	schema := "dtq_cli_" + hex.EncodeToString(b)
	_, err = admin.Exec(`CREATE SCHEMA ` + schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`) })
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestOutboxCommands: `dtq outbox migrate` creates the table (twice is
// fine), `dtq outbox relay` submits committed rows until stopped.
func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	pg := outboxURL(t)
	for range 2 {
		code, out, errOut := runCmd(t, nil, "outbox", "migrate", "--postgres-url", pg)
		require.Equal(t, 0, code, errOut)
		require.Equal(t, "dtq_outbox is ready\n", out)
	}
	code, _, errOut := runCmd(t, nil, "outbox", "migrate")
	require.Equal(t, exitUsage, code)
	require.Contains(t, errOut, "--postgres-url is required")

	db, err := sql.Open("pgx", pg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	tx, err := db.Begin()
	require.NoError(t, err)
	id, err := dtqoutbox.Insert(context.Background(), tx, dtq.Submission{Type: "echo", Payload: map[string]any{"n": 1}})
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	shared := redistest.Shared(t)
	prefix := redistest.New(t).Prefix
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, stderr syncBuffer
	go func() {
		done <- execute(ctx, []string{"outbox", "relay", "--postgres-url", pg, "--poll-interval", "50ms"},
			&env{stdout: &out, stderr: &stderr, lookupEnv: mapEnv(map[string]string{"DTQ_REDIS_URL": shared.URL(), "DTQ_KEY_PREFIX": prefix})})
	}()
	var taskID sql.NullString
	var nonce string
	require.Eventually(t, func() bool {
		require.NoError(t, db.QueryRow(`SELECT task_id, key_nonce FROM dtq_outbox WHERE id = $1`, id).Scan(&taskID, &nonce))
		return taskID.Valid
	}, 30*time.Second, 20*time.Millisecond, "the row was not relayed; stderr:\n%s", &stderr)
	cancel()
	require.Equal(t, 0, <-done, stderr.String())
	insp := openDeployment(t, shared.Client(t), prefix).Inspector()
	ti, err := insp.GetTask(context.Background(), taskID.String)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("outbox:%d:%s", id, nonce), *ti.IdempotencyKey)
	require.Contains(t, stderr.String(), "outbox relay started")
}
