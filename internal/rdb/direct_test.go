package rdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/rdbtest"
	"github.com/dtq-io/dtq/internal/redistest"
)

// These tests call the exported *RDB methods no other test names, one by
// one, on tasks the rdbtest factory writes through the real scripts.

// bundle is what a direct test needs.
type bundle struct {
	ctx  context.Context
	r    *rdb.RDB
	c    *redis.Client
	keys rdb.Keys
	f    *rdbtest.Factory
	now  time.Time // the clock of every write
}

func setup(t *testing.T) *bundle {
	t.Helper()
	s := redistest.New(t)
	redistest.CheckSlots(t, s.Client, rdb.HashSlot)
	r := rdb.New(s.Client, s.Prefix)
	return &bundle{ctx: context.Background(), r: r, c: s.Client, keys: r.Keys(), f: rdbtest.New(r),
		now: time.Now().Truncate(time.Minute).Add(30 * time.Second)}
}

// privateRDB is an RDB on a redis-server of the test's own started with
// args, for tests that change server-wide state (the script cache, config).
func privateRDB(t *testing.T, args ...string) (*rdb.RDB, *redis.Client) {
	t.Helper()
	srv, err := redistest.Start(args...)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c := srv.Client(t)
	return rdb.New(c, "p"), c
}
