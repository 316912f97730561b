package dtq

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Inspector reads tasks and queues. It never changes state; it is safe for
// concurrent use.
type Inspector struct {
	rdb   *rdb.RDB
	clock func() time.Time // the deployment's Clock
}

// Inspector returns an Inspector reading d.
func (d *Deployment) Inspector() *Inspector {
	return &Inspector{rdb: d.storage(), clock: d.dep.clock}
}

// GetTask returns the task with its result and attempt history, or
// ErrTaskNotFound.
func (i *Inspector) GetTask(ctx context.Context, id string) (*dtqtype.TaskInfo, error) {
	t, err := i.rdb.GetTask(ctx, id)
	if errors.Is(err, rdb.ErrNotFound) {
		return nil, ErrTaskNotFound
	}
	return t, err
}

// WaitTask returns the task once it is terminal, or as it is when wait
// passes or ctx ends (whichever is first). It polls the task's status, backing
// off from 10ms to 250ms, so a quick task answers quickly.
func (i *Inspector) WaitTask(ctx context.Context, id string, wait time.Duration) (*dtqtype.TaskInfo, error) {
	t, err := i.GetTask(ctx, id)
	if err != nil || t.Status.Terminal() || wait <= 0 {
		return t, err
	}
	storage, err := i.rdb.TaskQueue(ctx, id) // the partition holding it, for a partitioned queue
	if err != nil {
		return nil, err
	}
	end, err := poll(ctx, wait, 10*time.Millisecond, 250*time.Millisecond, func() (bool, error) {
		st, err := i.rdb.TaskStatus(ctx, storage, id)
		return st == "" || st.Terminal(), err
	})
	switch {
	case err != nil:
		return nil, err
	case end == pollCancelled:
		return t, nil
	}
	return i.GetTask(ctx, id)
}

// pollEnd says why poll returned.
type pollEnd int

const (
	pollDone pollEnd = iota
	pollTimedOut
	pollCancelled
)

// poll calls check after first, then at intervals doubling up to most,
// until check reports done or fails, wait passes, or ctx ends. The waits on
// tasks and workflows share it.
func poll(ctx context.Context, wait, first, most time.Duration, check func() (bool, error)) (pollEnd, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for interval := first; ; interval = min(interval*2, most) {
		tick := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			tick.Stop()
			return pollCancelled, nil
		case <-deadline.C:
			tick.Stop()
			return pollTimedOut, nil
		case <-tick.C:
		}
		if done, err := check(); err != nil || done {
			return pollDone, err
		}
	}
}

// ListTasks returns a page of tasks, newest first. A filtered page may be
// short, even empty, while more remain. A bad filter or Limit is a
// *ValidationError, a bad cursor ErrInvalidCursor.
func (i *Inspector) ListTasks(ctx context.Context, params *TaskListParams) (*dtqtype.ListResult[*dtqtype.TaskInfo], error) {
	p := listParams(params)
	if err := checkList(&p.Limit, 50, p.Queue); err != nil {
		return nil, err
	}
	if p.Status != "" && !p.Status.Valid() {
		return nil, invalid("status", "must be one of %v", dtqtype.Statuses)
	}
	res, err := i.rdb.ListTasks(ctx, &p)
	if err != nil && !errors.Is(err, ErrInvalidCursor) {
		return nil, fmt.Errorf("dtq: list tasks: %w", err)
	}
	return res, err
}

// Ready reports whether Redis answers, is at least 7.0, holds dtq's
// scripts (loading them if needed) and runs with maxmemory-policy
// noeviction. A failed check is a *ReadinessError.
func (i *Inspector) Ready(ctx context.Context) error {
	return readinessError(i.rdb.Ready(ctx))
}

// ReadyChecks is Ready, and also names the checks it could not make
// ("redis_version", "maxmemory_policy") because the server refuses or
// hides what they read, as managed services do with INFO and CONFIG: those
// are not held against it (docs/compatibility.md).
func (i *Inspector) ReadyChecks(ctx context.Context) (unknown []string, err error) {
	unknown, err = i.rdb.ReadyChecks(ctx)
	return unknown, readinessError(err)
}

// readinessError turns a failed storage readiness check into a
// *ReadinessError; other errors and nil are returned as they are.
func readinessError(err error) error {
	if re, ok := errors.AsType[*rdb.ReadyError](err); ok {
		return &ReadinessError{Check: re.Check, Detail: re.Detail, err: re.Err}
	}
	return err
}

// MinRedisVersion is the oldest Redis dtq runs on.
const MinRedisVersion = rdb.MinRedisVersion

// ErrRedisTooOld is wrapped by CheckRedis's error for a Redis older than
// MinRedisVersion.
var ErrRedisTooOld = rdb.ErrRedisTooOld

// CheckRedis reads the Redis version and loads dtq's scripts, as a process
// does before it serves: an error wraps ErrRedisTooOld for a Redis older
// than MinRedisVersion. It returns the version found ("" when the server
// does not say).
func (i *Inspector) CheckRedis(ctx context.Context) (string, error) {
	v, err := i.rdb.CheckVersion(ctx)
	if err != nil {
		return v, err
	}
	if err := i.rdb.LoadScripts(ctx); err != nil {
		return v, fmt.Errorf("load scripts: %w", err)
	}
	return v, nil
}

// RedisMemory returns Redis's used memory and maxmemory (summed over the
// masters of a Cluster), or nil when the server does not report them.
func (i *Inspector) RedisMemory(ctx context.Context) (*dtqtype.RedisMemory, error) {
	m, ok, err := i.rdb.Memory(ctx)
	if err != nil || !ok {
		return nil, err
	}
	return &m, nil
}

// Readiness checks, as named by ReadinessError.Check.
const (
	CheckRedisReachable  = rdb.CheckRedis           // Redis answers
	CheckScripts         = rdb.CheckScripts         // dtq's scripts are loaded
	CheckMaxmemoryPolicy = rdb.CheckMaxmemoryPolicy // maxmemory-policy is noeviction
	CheckRedisVersion    = rdb.CheckRedisVersion    // Redis is at least 7.0
)

// ReadinessError is a failed readiness check. Check is one of CheckRedisReachable,
// CheckRedisVersion, CheckScripts or CheckMaxmemoryPolicy (and, from
// Worker.Ready, CheckRegistered or CheckDraining) and is safe to show anyone; the
// wrapped cause may name the Redis address or carry a driver's message and
// belongs in the server's log only.
type ReadinessError struct {
	Check string
	// Detail adds what is safe to show about the failure (the Redis version
	// found, for CheckRedisVersion), or is "".
	Detail string
	err    error
}

// Error names the check and the cause.
func (e *ReadinessError) Error() string { return "dtq: not ready: " + e.Check + ": " + e.err.Error() }

// Unwrap returns the cause.
func (e *ReadinessError) Unwrap() error { return e.err }

// TaskQueue returns the queue a task id belongs to (its registry number is
// part of the id), or ErrTaskNotFound when the id is malformed or names no
// registered queue. It does not check that the task exists.
func (i *Inspector) TaskQueue(ctx context.Context, id string) (string, error) {
	q, err := i.rdb.TaskQueue(ctx, id)
	if err != nil {
		return "", fmt.Errorf("dtq: task queue: %w", err)
	}
	if q == "" {
		return "", ErrTaskNotFound
	}
	return q, nil
}
