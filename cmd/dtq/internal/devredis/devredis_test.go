package devredis_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/devredis"
	"github.com/dtq-io/dtq/internal/rdb"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func client(t *testing.T, b devredis.Backend) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(b.URL())
	require.NoError(t, err)
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServerKeepsDataAcrossRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), ".dtq")

	s, err := devredis.StartServer(ctx, dir, 0)
	require.NoError(t, err)
	require.Contains(t, s.Describe(), "private redis-server, data in ")
	c := client(t, s)
	cfg, err := c.ConfigGet(ctx, "*").Result()
	require.NoError(t, err)
	require.Equal(t, "yes", cfg["appendonly"])
	require.Equal(t, "everysec", cfg["appendfsync"])
	require.Equal(t, "noeviction", cfg["maxmemory-policy"])
	require.Equal(t, "1073741824", cfg["maxmemory"])
	require.Equal(t, "127.0.0.1", cfg["bind"])
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Stop(ctx))
	require.NoError(t, s.Stop(ctx), "Stop is idempotent")
	require.Error(t, c.Ping(ctx).Err())

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries)

	s2, err := devredis.StartServer(ctx, dir, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, s2.Stop(ctx)) }()
	require.Equal(t, "v", client(t, s2).Get(ctx, "k").Val(), "the AOF brought the key back")
	require.Equal(t, s.URL(), s2.URL(), "a restart on the same directory keeps the port")
}

// TestServerPort checks the port choice: a pinned port is used and written
// to the port file; a later unpinned start reuses it; a stored port that is
// taken meanwhile gives way to a free one; a pinned port that is taken fails
// with ErrPortInUse.
func TestServerPort(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), ".dtq")
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := hold.Addr().(*net.TCPAddr).Port
	require.NoError(t, hold.Close())

	s, err := devredis.StartServer(ctx, dir, port)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("redis://127.0.0.1:%d/0", port), s.URL())
	stored, err := os.ReadFile(filepath.Join(dir, devredis.PortFile))
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%d\n", port), string(stored))

	// While it runs, the same port pinned elsewhere is refused.
	_, err = devredis.StartServer(ctx, filepath.Join(t.TempDir(), ".dtq"), port)
	require.ErrorIs(t, err, devredis.ErrPortInUse)
	require.NoError(t, s.Stop(ctx))

	s, err = devredis.StartServer(ctx, dir, 0)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("redis://127.0.0.1:%d/0", port), s.URL(), "the stored port is reused")
	require.NoError(t, s.Stop(ctx))

	// Someone else took the stored port: another one is chosen and kept.
	taken, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	require.NoError(t, err)
	defer taken.Close()
	s, err = devredis.StartServer(ctx, dir, 0)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Stop(ctx)) }()
	require.NotEqual(t, fmt.Sprintf("redis://127.0.0.1:%d/0", port), s.URL())
	stored, err = os.ReadFile(filepath.Join(dir, devredis.PortFile))
	require.NoError(t, err)
	require.Equal(t, s.URL(), "redis://127.0.0.1:"+strings.TrimSpace(string(stored))+"/0")
}

func TestServerCancelledStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := devredis.StartServer(ctx, t.TempDir(), 0)
	require.ErrorIs(t, err, context.Canceled)
}

func TestMemoryExpiresKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := devredis.StartMemory()
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Stop(ctx)) }()
	require.Contains(t, m.Describe(), "memory only")
	c := client(t, m)
	require.NoError(t, c.Set(ctx, "short", "v", 30*time.Millisecond).Err())
	require.NoError(t, c.Set(ctx, "long", "v", time.Hour).Err())
	require.Eventually(t, func() bool { return c.Exists(ctx, "short").Val() == 0 },
		5*time.Second, 5*time.Millisecond, "the key never expired")
	require.EqualValues(t, 1, c.Exists(ctx, "long").Val())
}

// TestMemoryRunsTheLifecycle runs tasks through submit, claim and finalize,
// then the stats and recount scripts, on the in-process fallback: dtq dev
// without redis-server must work, not only start.
func TestMemoryRunsTheLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m, err := devredis.StartMemory()
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Stop(ctx)) }()
	c := client(t, m)
	d := openDeployment(t, c, "")
	cl, err := d.NewClient(nil)
	require.NoError(t, err)
	w, err := d.NewWorker(&dtq.WorkerConfig{Concurrency: 4, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	var done atomic.Int64
	w.HandleFunc("echo", func(context.Context, *dtq.Task) (any, error) {
		done.Add(1)
		return map[string]bool{"ok": true}, nil
	})
	wctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	defer func() {
		stop()
		require.NoError(t, <-ran)
	}()

	const n = 20
	for i := range n {
		s := dtq.Submission{Type: "echo"}
		if i%5 == 0 {
			// a task with a key: the claim reads its hash (as a RESP3 map
			// where the server gives one)
			s.IdempotencyKey = fmt.Sprintf("k-%d", i)
		}
		_, err := cl.Submit(ctx, s)
		require.NoError(t, err)
	}
	_, err = cl.Submit(ctx, dtq.Submission{Type: "echo", Delay: time.Hour})
	require.NoError(t, err)
	insp := d.Inspector()
	require.Eventually(t, func() bool {
		q, err := insp.GetQueue(ctx, "default")
		return err == nil && q.Depth == 1 && q.Running == 0
	}, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, n, done.Load())

	admin, err := d.NewAdmin(nil)
	require.NoError(t, err)
	old, now, err := admin.RecountQueue(ctx, "default")
	require.NoError(t, err)
	require.EqualValues(t, 1, old)
	require.EqualValues(t, 1, now, "the delayed task")
	q, err := insp.GetQueue(ctx, "default")
	require.NoError(t, err)
	require.Zero(t, q.ReadyTotal)
	require.EqualValues(t, 1, q.Scheduled)

	// A queued task's payload is read from its stream entry; a page after a
	// cursor comes from list_page's binary search.
	idle, err := cl.Submit(ctx, dtq.Submission{Queue: "idle", Type: "echo", Payload: map[string]int{"n": 7}})
	require.NoError(t, err)
	got, err := insp.GetTask(ctx, idle.TaskID)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":7}`, string(got.Payload))
	first, err := insp.ListTasks(ctx, &dtq.TaskListParams{Queue: "default", Limit: 5})
	require.NoError(t, err)
	require.Len(t, first.Items, 5)
	require.NotEmpty(t, first.NextCursor)
	second, err := insp.ListTasks(ctx, &dtq.TaskListParams{Queue: "default", Limit: 5, Cursor: first.NextCursor})
	require.NoError(t, err)
	require.Len(t, second.Items, 5)
	require.Less(t, second.Items[0].ID, first.Items[4].ID)

	// The tidy pass walks the listing index.
	res, err := rdb.New(c, "dtq").Tidy(ctx, "default", time.Now(), time.Now())
	require.NoError(t, err)
	require.True(t, res.Wrapped)
}
