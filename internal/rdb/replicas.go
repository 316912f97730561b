package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
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
	"list_page": true, "log_page": true, // reads
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
	for range 3 {
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

// DurabilityWarnings says what keeps replica acknowledgements from
// protecting an acknowledged write: a master without the append-only file
// (restarted, it comes back empty and a failover to it wipes its replicas)
// or with fewer connected replicas than the acknowledgements need (every
// acknowledged write then fails). A master that refuses CONFIG and INFO
// persistence is reported as unknown. None when acknowledgements are off.
func (r *RDB) DurabilityWarnings(ctx context.Context) []string {
	if r.acks == 0 {
		return nil
	}
	var (
		mu   sync.Mutex
		warn []string
	)
	check := func(ctx context.Context, c redis.UniversalClient) error {
		w := durabilityWarnings(ctx, c, r.acks)
		mu.Lock()
		warn = append(warn, w...)
		mu.Unlock()
		return nil
	}
	_ = r.eachMaster(ctx, check) // check reports its failures as warnings
	slices.Sort(warn)
	return slices.Compact(warn)
}

// durabilityWarnings checks one master. The texts name no address: /ready
// is unauthenticated.
func durabilityWarnings(ctx context.Context, c redis.UniversalClient, acks int) []string {
	var warn []string
	aof := ""
	if v, err := c.ConfigGet(ctx, "appendonly").Result(); err == nil {
		aof = v["appendonly"]
	} else if info, err := c.Info(ctx, "persistence").Result(); err == nil {
		aof = map[string]string{"1": "yes", "0": "no"}[infoField(info, "aof_enabled")]
	}
	switch aof {
	case "yes":
	case "no":
		warn = append(warn, fmt.Sprintf("DTQ_REPLICA_ACKS=%d but a Redis master runs without the append-only file "+
			"(appendonly no): restarted, it comes back empty and a failover to it loses acknowledged tasks; "+
			"set appendonly yes on every node (docs/operations.md, \"Replica acknowledgements\")", acks))
	default:
		warn = append(warn, fmt.Sprintf("DTQ_REPLICA_ACKS=%d but whether a Redis master keeps the append-only file "+
			"is unknown (CONFIG GET and INFO persistence were refused): acknowledged tasks survive failovers only "+
			"with appendonly yes on every node", acks))
	}
	if info, err := c.Info(ctx, "replication").Result(); err == nil {
		if n, err := strconv.Atoi(infoField(info, "connected_slaves")); err == nil && n < acks {
			warn = append(warn, fmt.Sprintf("DTQ_REPLICA_ACKS=%d but a Redis master has %d connected replica(s): "+
				"every acknowledged write fails until enough replicas are connected", acks, n))
		}
	}
	return warn
}
