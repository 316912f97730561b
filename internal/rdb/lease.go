package rdb

import (
	"context"
	"fmt"
	"time"
)

// LeaseRef names one held lease.
type LeaseRef struct {
	ID      string
	Attempt int
}

// RenewStatus is the outcome of renewing one lease.
type RenewStatus int

// Renewal outcomes.
const (
	Renewed RenewStatus = iota
	LeaseLost
	CancelRequested
)

// RenewLeases extends the worker's leases on queue, fenced per task.
func (r *RDB) RenewLeases(ctx context.Context, queue string, s *WorkerSettings, now time.Time, refs []LeaseRef) ([]RenewStatus, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	tasks := make([]renewTasksItem, len(refs))
	for i, l := range refs {
		tasks[i] = renewTasksItem(l)
	}
	v, err := r.callRenew(ctx, &renewKeys{Lease: r.keys.Lease(queue)}, &renewArgs{
		Now: now.UnixMilli(), LeaseMS: s.Lease.Milliseconds(), WorkerID: s.WorkerID, TaskPrefix: r.keys.TaskPrefix(queue),
		Claim: s.Claim, Tasks: tasks,
	})
	if err != nil {
		return nil, err
	}
	out := make([]RenewStatus, len(v))
	for i, c := range v {
		out[i] = RenewStatus(c)
	}
	return out, nil
}

// LeaseSecret returns the deployment's stored lease token secret, storing
// offer first when none is: every process that calls it gets the same
// secret, whichever stored it.
func (r *RDB) LeaseSecret(ctx context.Context, offer string) (string, error) {
	return r.callLeaseSecret(ctx, &leaseSecretKeys{Secret: r.keys.LeaseSecret()}, &leaseSecretArgs{Offer: offer})
}

// Reclaim takes over up to room tasks of queue whose lease expired, and
// dead-letters those with no attempts left. mine lists the attempts the
// calling process runs now: their leases are renewed, never taken over.
// nonce identifies the call as for Claim.
func (r *RDB) Reclaim(ctx context.Context, queue string, s *WorkerSettings, room int, now time.Time, nonce string, mine []LeaseRef) ([]ClaimedTask, error) {
	k := r.keys
	l := r.limitKeys(queue)
	items := make([]reclaimMineItem, len(mine))
	for i, m := range mine {
		items[i] = reclaimMineItem(m)
	}
	v, err := r.callReclaim(ctx, &reclaimKeys{
		Lease: k.Lease(queue), Events: k.Events(queue), Depth: k.Depth(queue), DLQ: k.DLQ(queue),
		Stats: k.Stats(queue, minuteOf(now)), Bands: r.bandStreams(queue), KeyRunning: l.keyRunning, Held: l.held,
		Limited: l.limited, Wake: l.wake, Retained: k.Retained(queue), Outbox: k.WorkflowOutbox(queue), KeyFreed: l.freed,
	}, &reclaimArgs{
		Now: now.UnixMilli(), LeaseMS: s.Lease.Milliseconds(), WorkerID: s.WorkerID, Group: Group,
		TaskPrefix: k.TaskPrefix(queue), IdemPrefix: k.IdempotencyPrefix(queue), Room: room, EventsMaxLen: s.EventsMaxLen,
		FailedRetS: seconds(s.FailedRetention), AttemptsCap: AttemptsCap, DLQEnabled: boolArg(s.DLQEnabled),
		DLQMaxLen: s.DLQMaxLen, Nonce: nonce, KeyWaitPrefix: k.KeyWaitPrefix(queue), Mine: items,
	})
	if err != nil {
		return nil, err
	}
	tasks, err := decodeClaimed(queue, v)
	if err != nil {
		return nil, fmt.Errorf("reclaim reply: %w", err)
	}
	return tasks, nil
}
