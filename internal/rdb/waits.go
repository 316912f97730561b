package rdb

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// maxWaitConns bounds a Waiter's connections per server: one per fetch
// loop blocked at once (a partition of a served queue each).
const maxWaitConns = 1024

// A Waiter keeps its idle connections (MaxIdleConns 0: no bound) for the
// next waits, rather than dialling one per wait.

// WaiterName is the client name of a Waiter's connections (CLIENT LIST
// shows which blocked connections are workers' waits).
const WaiterName = "dtq-wait"

// Waiter makes the blocking reads of a worker's idle fetch loops on a
// client of its own, to the same servers, whose pool grows with the loops
// blocked at once. A worker serving partitioned queues runs a fetch loop
// per partition, and as many reads blocked for up to a second each would
// otherwise hold every connection of the pool its claims and finalizes
// need (docs/partitions.md). It is safe for concurrent use; Close it when
// done.
type Waiter struct {
	r *RDB
	c redis.UniversalClient
}

// NewWaiter returns a Waiter of r's servers.
func (r *RDB) NewWaiter() *Waiter {
	w := &Waiter{r: r, c: r.c}
	switch c := r.c.(type) {
	case *redis.Client:
		opt := *c.Options()
		opt.PoolSize, opt.MinIdleConns, opt.MaxIdleConns, opt.ClientName = maxWaitConns, 0, 0, WaiterName
		opt.PushNotificationProcessor = nil
		opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		opt.ClientSideCache, opt.ClientSideCacheConfig = nil, nil
		w.c = redis.NewClient(&opt)
	case *redis.ClusterClient:
		opt := *c.Options()
		opt.PoolSize, opt.MinIdleConns, opt.MaxIdleConns, opt.ClientName = maxWaitConns, 0, 0, WaiterName
		opt.PushNotificationProcessor = nil
		opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		w.c = redis.NewClusterClient(&opt)
	}
	return w
}

// ReadyBand is RDB.WaitReadyBand on the Waiter's client.
func (w *Waiter) ReadyBand(ctx context.Context, queue string, lastIDs []string, block time.Duration) (int, error) {
	return w.r.waitReadyBand(ctx, w.c, queue, lastIDs, block)
}

// Wake is RDB.WaitWake on the Waiter's client.
func (w *Waiter) Wake(ctx context.Context, queue, after string, block time.Duration) (string, error) {
	return w.r.waitWake(ctx, w.c, queue, after, block)
}

// Close closes the Waiter's client (not r's).
func (w *Waiter) Close() error {
	if w.c == w.r.c {
		return nil
	}
	return w.c.Close()
}
