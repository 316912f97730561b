package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ClaimedTask is a task a worker now runs.
type ClaimedTask struct {
	Queue           string
	ID              string
	Attempt         int
	Type            string
	Payload         []byte
	TimeoutMS       int64
	MaxAttempts     int
	IdempotencyKey  string
	CreatedAt       int64
	CancelRequested bool
	Metadata        []byte
	Priority        int
	// Workflow and Ref name the workflow node the task is ("" for a plain
	// task); Deps are its deps' outcomes as JSON ({ref: {status, result}}).
	Workflow, Ref string
	Deps          []byte
}

// EnsureGroups creates the consumer group on every band stream of queue
// (creating the streams), ignoring groups that exist. Workers call it once
// per queue at start and again when a script reports a missing group.
//
// Redis refuses XGROUP CREATE while it is at maxmemory even when the group
// exists; such a group is then looked up (a read, allowed at maxmemory) and
// counts as created. A group that is missing at maxmemory fails with an
// error redis.IsOOMError recognises: the caller retries later.
func (r *RDB) EnsureGroups(ctx context.Context, queue string) error {
	for b := range NumBands {
		stream := r.keys.Stream(queue, b)
		err := r.c.XGroupCreateMkStream(ctx, stream, Group, "0").Err()
		if err == nil || strings.Contains(err.Error(), "BUSYGROUP") {
			continue
		}
		if redis.IsOOMError(err) {
			if ok, gerr := r.hasGroup(ctx, stream); gerr == nil && ok {
				continue
			}
		}
		return fmt.Errorf("create group on %s: %w", stream, err)
	}
	return nil
}

// hasGroup reports whether stream has the workers' consumer group.
func (r *RDB) hasGroup(ctx context.Context, stream string) (bool, error) {
	groups, err := r.c.XInfoGroups(ctx, stream).Result()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return false, nil
		}
		return false, err
	}
	for _, g := range groups {
		if g.Name == Group {
			return true, nil
		}
	}
	return false, nil
}

func (r *RDB) bandStreams(queue string) []string {
	out := make([]string, NumBands)
	for b := range out {
		out[b] = r.keys.Stream(queue, b)
	}
	return out
}

func minuteOf(now time.Time) int64 { return now.Unix() / 60 }

// ClaimResult is what Claim found.
type ClaimResult struct {
	Tasks   []ClaimedTask
	Paused  bool
	NoGroup bool
	// LastIDs, set when the bands ran out before the slots did, are the
	// newest (already delivered) entry ids of bands p9..p0 (and of the wake
	// stream, for a queue with key queues): WaitReady blocks until an entry
	// newer than them exists.
	LastIDs []string
	// Limited means a flow-control limit allowed no start (nothing was
	// read): Reason is "rate" or "concurrency", and Wait how long until the
	// next token, or -1 for "until a running task finishes" (WaitWake). With
	// Reason "key_rate", Tasks holds what the call started and Wait is when
	// the next key's token is due.
	Limited bool
	Reason  string
	Wait    time.Duration
	// Held counts tasks this call held back because their concurrency key
	// was at its limit.
	Held int
}

// Claim delivers up to limit ready tasks of queue to the worker, highest
// priority first, moving each to running under a lease. nonce identifies the
// call: when an error leaves it unknown whether a claim ran, sending it
// again with the same now and nonce answers the tasks it started.
func (r *RDB) Claim(ctx context.Context, queue string, s *WorkerSettings, limit int, now time.Time, nonce string) (*ClaimResult, error) {
	k := r.keys
	v, err := r.callClaim(ctx, &claimKeys{
		Lease: k.Lease(queue), Expiry: k.Expiry(queue), Schedule: k.Schedule(queue), Events: k.Events(queue),
		Depth: k.Depth(queue), Paused: k.Paused(queue), Stats: k.Stats(queue, minuteOf(now)), Bands: r.bandStreams(queue),
		Limits: k.Limits(queue), Rate: k.Rate(queue), KeyRunning: k.KeyRunning(queue), Held: k.Held(queue),
		Limited: k.Limited(queue), Retained: k.Retained(queue), Outbox: k.WorkflowOutbox(queue),
		FairState: k.FairState(queue), FairKeys: k.FairKeys(queue), FairDelay: k.FairDelay(queue), KeyRate: k.KeyRate(queue),
		Wake: k.Wake(queue), KeyFreed: k.KeyFreed(queue),
	}, &claimArgs{
		Now: now.UnixMilli(), WorkerID: s.WorkerID, Group: Group, Max: limit, LeaseMS: s.Lease.Milliseconds(),
		TaskPrefix: k.TaskPrefix(queue), IdemPrefix: k.IdempotencyPrefix(queue), EventsMaxLen: s.EventsMaxLen,
		FailedRetS: seconds(s.FailedRetention), Nonce: nonce, KeyWaitPrefix: k.KeyWaitPrefix(queue),
		FairActive: k.FairActivePrefix(queue), KeyQueue: k.KeyQueuePrefix(queue),
	})
	if err != nil {
		return nil, err
	}
	res := &ClaimResult{Paused: v.State == "paused", NoGroup: v.State == "nogroup", Limited: v.State == "limited",
		Reason: v.Reason, Held: int(v.Held), LastIDs: v.LastIDs}
	if w := v.WaitMS; w != 0 {
		res.Wait = time.Duration(w) * time.Millisecond
		if w < 0 {
			res.Wait = -1
		}
	}
	if res.Tasks, err = decodeClaimed(queue, v.Tasks); err != nil {
		return nil, fmt.Errorf("claim reply: %w", err)
	}
	return res, nil
}

// decodeClaimed reads the tasks claim and reclaim return, one flat list
// (lua/_attempts.lua, claimed_put): per task a head "<n> <attempt>
// <timeout_ms> <max_attempts> <created_at> <cancel_requested> <priority>
// <id>", then n elements: type, payload, metadata[, idem_key[, wf, deps]].
func decodeClaimed(queue string, flat []string) ([]ClaimedTask, error) {
	var out []ClaimedTask
	for i := 0; i < len(flat); {
		f := strings.SplitN(flat[i], " ", 8)
		if len(f) < 8 {
			return nil, fmt.Errorf("task %d: a head of %d fields, want 8", len(out)+1, len(f))
		}
		n := int(atoi64(f[0]))
		if n < 3 || i+1+n > len(flat) {
			return nil, fmt.Errorf("task %d: %d elements announced, %d left", len(out)+1, n, len(flat)-i-1)
		}
		el := flat[i+1 : i+1+n]
		i += 1 + n
		str := func(j int) string { return el[j] }
		id := f[7]
		created := atoi64(f[4])
		if f[4] == "" {
			// A claim from a band entry leaves out a created_at that is
			// the time in the id (claimFields).
			created = TaskIDTime(id).UnixMilli()
		}
		t := ClaimedTask{
			Queue: queue, ID: id, Attempt: int(atoi64(f[1])), Type: str(0),
			Payload: []byte(str(1)), TimeoutMS: atoi64(f[2]), MaxAttempts: int(atoi64(f[3])),
			CreatedAt: created, CancelRequested: f[5] == "1",
			Metadata: []byte(str(2)), Priority: int(atoi64(f[6])),
		}
		if n >= 4 {
			t.IdempotencyKey = str(3)
		}
		if n >= 6 && str(4) != "" {
			t.Workflow, t.Ref, _ = strings.Cut(str(4), ":")
			t.Deps = []byte(str(5))
		}
		out = append(out, t)
	}
	return out, nil
}

// WaitReady blocks until an entry newer than lastIDs (bands p9..p0, and
// for a queue with key queues the wake stream last) exists in any band of
// queue, or block passes. It reads without a group, so it delivers
// nothing: the claim script that follows does the delivery. Ingest into
// key queues writes no band entry, only the wake stream.
func (r *RDB) WaitReady(ctx context.Context, queue string, lastIDs []string, block time.Duration) error {
	_, err := r.WaitReadyBand(ctx, queue, lastIDs, block)
	return err
}

// WaitReadyBand is WaitReady that also says the highest band with a new
// entry: 0 when none came, or only the wake stream moved (its band is not
// known).
func (r *RDB) WaitReadyBand(ctx context.Context, queue string, lastIDs []string, block time.Duration) (int, error) {
	return r.waitReadyBand(ctx, r.c, queue, lastIDs, block)
}

func (r *RDB) waitReadyBand(ctx context.Context, c redis.UniversalClient, queue string, lastIDs []string, block time.Duration) (int, error) {
	if len(lastIDs) != NumBands && len(lastIDs) != NumBands+1 {
		return 0, nil
	}
	streams := make([]string, 0, 2*len(lastIDs))
	for b := NumBands - 1; b >= 0; b-- {
		streams = append(streams, r.keys.Stream(queue, b))
	}
	if len(lastIDs) > NumBands {
		streams = append(streams, r.keys.Wake(queue))
	}
	streams = append(streams, lastIDs...)
	res, err := c.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: 1, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	band := 0
	for _, st := range res {
		for b := NumBands - 1; b > band; b-- {
			if st.Stream == r.keys.Stream(queue, b) {
				band = b
				break
			}
		}
	}
	return band, err
}

// WaitWake blocks until the wake stream of queue has an entry after after
// (a releasing finalize writes one when a concurrency limit stopped a
// claim), or block passes. It returns the newest entry id seen, to pass as
// after next time; start with "0-0".
func (r *RDB) WaitWake(ctx context.Context, queue, after string, block time.Duration) (string, error) {
	return r.waitWake(ctx, r.c, queue, after, block)
}

func (r *RDB) waitWake(ctx context.Context, c redis.UniversalClient, queue, after string, block time.Duration) (string, error) {
	res, err := c.XRead(ctx, &redis.XReadArgs{Streams: []string{r.keys.Wake(queue), after}, Count: 1, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return after, nil
	}
	if err != nil {
		return after, err
	}
	if len(res) > 0 && len(res[0].Messages) > 0 {
		return res[0].Messages[len(res[0].Messages)-1].ID, nil
	}
	return after, nil
}
