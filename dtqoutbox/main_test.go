package dtqoutbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver

	"github.com/dtq-io/dtq/internal/redistest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	os.Exit(redistest.Main(m))
}

// postgresURL is the server the tests use: DTQ_TEST_POSTGRES_URL, or the
// one this repository's CI runs on loopback.
func postgresURL() string {
	if u := os.Getenv("DTQ_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// testDB is a schema of its own on the test server, dropped at cleanup.
type testDB struct {
	db     *sql.DB
	url    string // its connection URL (search_path set to the schema)
	schema string
}

// newDB creates a schema for t with the outbox table migrated into it.
func newDB(t testing.TB) *testDB {
	t.Helper()
	admin, err := sql.Open("pgx", postgresURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.PingContext(context.Background()); err != nil {
		t.Fatalf("the outbox tests need PostgreSQL at %s (DTQ_TEST_POSTGRES_URL; .ci/run starts it): %v", postgresURL(), err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "dtq_test_" + hex.EncodeToString(b)
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`) })
	u, err := url.Parse(postgresURL())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return &testDB{db: db, url: u.String(), schema: schema}
}
