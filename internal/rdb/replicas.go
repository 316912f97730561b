package rdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotReplicated is returned by a write that ran on the master but was
// not acknowledged by the required number of replicas in time (see
// SetReplicaAcks). The write may still reach them, or be lost in a
// failover: sending it again is safe for every write dtq acknowledges
// (submissions with an idempotency key, finalizes, admin actions).
var ErrNotReplicated = errors.New("write not acknowledged by enough replicas in time")

// unacked are the scripts whose effect no caller is told of: a claim, a
// renewal or a promotion lost in a failover is redone by the next call, so
// they do not wait for replicas.
var unacked = map[string]bool{
	"claim": true, "renew": true, "reclaim": true, "promote": true, "sweep_expired": true,
	"prune_consumers": true, "worker_start": true, "worker_beat": true, "op_claim": true,
	"op_finish": true, "register_queue": true, "remote_beat": true,
	"worker_admit": true, "worker_forget": true,
	"list_page": true, // a read
}

// SetReplicaAcks makes every acknowledged write (submission, finalize,
// admin action) wait, on the connection that wrote it, for WAIT n timeout:
// a write that fewer than n replicas acknowledged within timeout fails with
// ErrNotReplicated. n = 0 (the default) waits for nothing. Call it before
// the RDB is used.
func (r *RDB) SetReplicaAcks(n int, timeout time.Duration) {
	r.acks, r.ackTimeout = n, timeout
}

// runAcked runs script s and WAIT in one pipeline on one connection of the
// master that serves keys, so WAIT covers exactly this write.
func (r *RDB) runAcked(ctx context.Context, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	var ev *redis.Cmd
	for try := 0; try < 3; try++ {
		node, err := r.writeNode(ctx, keys)
		if err != nil {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
		var wait *redis.IntCmd
		run := func() {
			pipe := node.Pipeline()
			ev = pipe.EvalSha(ctx, s.Hash(), keys, args...)
			wait = redis.NewIntCmd(ctx, "wait", r.acks, r.ackTimeout.Milliseconds())
			_ = pipe.Process(ctx, wait)
			_, _ = pipe.Exec(ctx)
		}
		run()
		if redis.HasErrorPrefix(ev.Err(), "NOSCRIPT") {
			if err := s.Load(ctx, node).Err(); err != nil {
				ev.SetErr(err)
				return ev
			}
			run()
		}
		if err := ev.Err(); err != nil {
			if cc, ok := r.c.(*redis.ClusterClient); ok && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
				cc.ReloadState(ctx) // the slot moved (a failover): find its new master
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return ev
		}
		if n, err := wait.Result(); err != nil || n < int64(r.acks) {
			if err == nil {
				err = fmt.Errorf("%w: %d of %d replicas within %v", ErrNotReplicated, n, r.acks, r.ackTimeout)
			}
			ev.SetErr(err)
		}
		return ev
	}
	return ev
}

// writer runs pipelines and loads scripts.
type writer interface {
	redis.Scripter
	Pipeline() redis.Pipeliner
}

// writeNode is the client whose pipeline runs on one connection of the
// master serving keys: the RDB's own client, or on Cluster the slot's
// master.
func (r *RDB) writeNode(ctx context.Context, keys []string) (writer, error) {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		return r.c, nil
	}
	if len(keys) == 0 {
		return nil, errors.New("rdb: a replicated write needs a key")
	}
	return cc.MasterForKey(ctx, keys[0])
}
