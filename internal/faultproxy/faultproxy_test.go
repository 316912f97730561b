package faultproxy_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

type bundle struct {
	ctx    context.Context
	proxy  *faultproxy.Proxy
	via    *redis.Client // through the proxy, no retries of its own
	direct *redis.Client
}

func setup(t *testing.T) *bundle {
	t.Helper()
	srv := redistest.Shared(t)
	p, err := faultproxy.Start(srv.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	via := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { via.Close() })
	return &bundle{ctx: context.Background(), proxy: p, via: via, direct: srv.Client(t)}
}

func TestForwardsAndResets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.via.Set(b.ctx, "fp:a", "1", time.Minute).Err())
	require.Equal(t, "1", b.direct.Get(b.ctx, "fp:a").Val())

	require.Equal(t, 1, b.proxy.ResetAll())
	require.Equal(t, "1", b.via.Get(b.ctx, "fp:a").Val(), "a new connection works")
	require.EqualValues(t, 1, b.proxy.Resets())
}

func TestOutageRefusesUntilItEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.via.Ping(b.ctx).Err())
	b.proxy.SetDown(true)
	require.Error(t, b.via.Ping(b.ctx).Err())
	require.Error(t, b.via.Ping(b.ctx).Err(), "new connections are refused too")
	b.proxy.SetDown(false)
	require.NoError(t, b.via.Ping(b.ctx).Err())
	require.Positive(t, b.proxy.Resets())
}

func TestCutAfterLandsTheWriteAndLosesTheReply(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.proxy.CutAfter([]byte("fp:cut-after"), 1)
	require.Error(t, b.via.Set(b.ctx, "fp:cut-after", "landed", time.Minute).Err())
	require.Equal(t, "landed", b.direct.Get(b.ctx, "fp:cut-after").Val())
	require.EqualValues(t, 1, b.proxy.Cuts())
	require.NoError(t, b.via.Set(b.ctx, "fp:cut-after", "again", time.Minute).Err(), "only n requests are cut")
}

func TestCutBeforeLosesTheWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.proxy.CutBefore([]byte("fp:cut-before"), 1)
	require.Error(t, b.via.Set(b.ctx, "fp:cut-before", "x", time.Minute).Err())
	require.Zero(t, b.direct.Exists(b.ctx, "fp:cut-before").Val())
}

func TestLatencyDelaysReplies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, b.via.Ping(b.ctx).Err())
	b.proxy.SetLatency(200 * time.Millisecond)
	began := time.Now()
	require.NoError(t, b.via.Ping(b.ctx).Err())
	require.GreaterOrEqual(t, time.Since(began), 200*time.Millisecond, "a lower bound only: the delay is added")
	b.proxy.SetLatency(0)
}

func TestCutAllNeedsEveryPattern(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.proxy.CutBeforeAll(1, []byte("fp:all-"), []byte("target"))
	require.NoError(t, b.via.Set(b.ctx, "fp:all-other", "x", time.Minute).Err(), "one pattern of two is no match")
	require.Error(t, b.via.Set(b.ctx, "fp:all-x", "target", time.Minute).Err())
	require.Zero(t, b.direct.Exists(b.ctx, "fp:all-x").Val())
	require.EqualValues(t, 1, b.proxy.Cuts())

	b.proxy.CutAfterAll(1, []byte("fp:all-y"), []byte("landed"))
	require.Error(t, b.via.Set(b.ctx, "fp:all-y", "landed", time.Minute).Err())
	require.Equal(t, "landed", b.direct.Get(b.ctx, "fp:all-y").Val())
	b.proxy.CutAfterAll(5)
	require.NoError(t, b.via.Set(b.ctx, "fp:all-y", "landed", time.Minute).Err(), "no pattern cuts nothing")
}
