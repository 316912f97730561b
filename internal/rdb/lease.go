package rdb

import (
	"context"
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
	c := r.reclaimCall(queue, s, room, now, nonce, mine)
	v, err := r.run(ctx, scriptReclaim, c.keys(), c.args()...).Slice()
	if err != nil {
		return nil, err
	}
	return decodeClaimed(queue, v), nil
}
