package dtq

import (
	"context"
	"errors"
)

// Worker readiness checks, as named by ReadinessError.Check, besides the
// Redis checks Inspector.Ready makes.
const (
	CheckRegistered = "registered" // Run has registered the worker in Redis
	CheckDraining   = "draining"   // the worker is stopping and takes no more tasks
)

// Errors wrapped by the ReadinessError of a failed worker check.
var (
	errNotRegistered = errors.New("dtq: the worker has not registered yet (Run not called, or still starting)")
	errDraining      = errors.New("dtq: the worker is draining")
)

// Ready reports whether the worker takes tasks: Run has registered it
// (Redis version checked, scripts loaded, consumer groups created, heartbeat
// record written), it is not draining, and Redis passes the checks of
// Inspector.Ready (it answers, is 7.0 or later, holds dtq's scripts and runs
// with maxmemory-policy noeviction). A failed check is a *ReadinessError
// naming it: CheckRegistered, CheckDraining or one of the Redis checks.
// Ready is safe to call from any goroutine, before, during and after Run.
func (w *Worker) Ready(ctx context.Context) error {
	switch {
	case w.draining.Load():
		return &ReadinessError{Check: CheckDraining, err: errDraining}
	case !w.registered.Load():
		return &ReadinessError{Check: CheckRegistered, err: errNotRegistered}
	}
	return readinessError(w.rdb.Ready(ctx))
}
