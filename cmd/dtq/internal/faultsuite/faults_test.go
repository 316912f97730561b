package faultsuite_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
)

// The fault scenarios (see doc.go). Each runs under load from two producers; see
// run for what each asserts. A fault's duration is slept on purpose: it is
// the fault, not a wait for something asynchronous.

// TestFaultConnectionResetMidFinalize (on a queue with rate, concurrency and
// per-key limits, so their counts are replayed too) cuts connections around finalizes,
// claims, submissions and renewals for 3 s: half the cuts let the request
// reach Redis and lose its reply, half reset the connection before it is
// sent; and every connection is reset now and then. max_attempts 1: a
// success that does not land, or a claim answered to nobody, would end the
// task dead-lettered.
func TestFaultConnectionResetMidFinalize(t *testing.T) {
	run(t, scenario{name: "reset_mid_finalize", maxAttempts: 1, keys: 4,
		limits: `{"rate": {"limit": 400, "period": "1s", "burst": 20}, "concurrency": 12, "key_concurrency": 2}`, fault: resetMidFinalize})
}

// resetMidFinalize is the fault of TestFaultConnectionResetMidFinalize.
func resetMidFinalize(t *testing.T, r *rig) {
	calls := [][]byte{[]byte(rdb.ScriptHash("finish_succeeded")), []byte(rdb.ScriptHash("claim")),
		[]byte(rdb.ScriptHash("ingest")), []byte(rdb.ScriptHash("renew"))}
	end := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(end); i++ {
		call := calls[(i/2)%len(calls)]
		if i%2 == 0 {
			r.proxy.CutAfter(call, 2)
		} else {
			r.proxy.CutBefore(call, 2)
		}
		time.Sleep(150 * time.Millisecond)
		if i%3 == 2 {
			r.proxy.ResetAll()
		}
	}
	r.proxy.CutAfter(nil, 0)
	require.Positive(t, r.proxy.Cuts(), "no call was cut")
}

// fairLimits share the queue between the scenario's keys (weights,
// per-key order, per-key rate and concurrency: docs/flow-control.md), so
// that claims go through the key queues and their turns.
const fairLimits = `{"fairness": {"default_weight": 1, "weights": {"k0": 3}}, "key_order": "fifo",
	"key_rate": {"limit": 300, "period": "1s", "burst": 10}, "key_concurrency": 2, "concurrency": 12}`

// TestFaultFairResets is TestFaultConnectionResetMidFinalize on a queue
// shared fairly between four keys: a claim whose reply is lost, sent
// again, must answer what it started without taking a key's slot or turn
// twice; a lost finalize must give the slot back once.
func TestFaultFairResets(t *testing.T) {
	run(t, scenario{name: "fair_resets", maxAttempts: 1, keys: 4, limits: fairLimits, fault: resetMidFinalize})
}

// TestFaultFairOutage takes Redis away for 5 s under load on a fairly
// shared queue.
func TestFaultFairOutage(t *testing.T) {
	run(t, scenario{name: "fair_outage_5s", visibility: 9 * time.Second, keys: 4, limits: fairLimits, fault: func(t *testing.T, r *rig) {
		r.proxy.SetDown(true)
		time.Sleep(5 * time.Second)
		r.proxy.SetDown(false)
	}})
}

// TestFaultFairWorkerPaused is TestFaultWorkerPaused on a fairly shared
// queue: the stopped worker's tasks are reclaimed, run again in their
// key's order, and its late outcomes fenced out.
//
// Submissions come half as often as in TestFaultWorkerPaused: with
// key_concurrency 2 and 300 ms handlers a key runs at most 6.7 tasks a
// second, and the busiest two keys get 3 in 10 submissions (by the last
// digit). At one every 100 ms from each producer they would get 6 a second,
// 90 % of what they can run, and on a loaded machine their backlog would
// outgrow the drain; at one every 200 ms they get 3 a second.
func TestFaultFairWorkerPaused(t *testing.T) {
	run(t, scenario{name: "fair_sigstop_past_lease", workers: 1, child: true, work: 300 * time.Millisecond, every: 200 * time.Millisecond,
		keys: 4, limits: fairLimits, fault: pauseChildPastLease})
}

// TestFaultHTTPWorkerResets runs the HTTP worker protocol (claims and
// completes through the API) with no Go worker, while connections between
// the API and Redis are cut around claims and finalizes and reset now and
// then: max_attempts 1, so a completed task whose success did not land, or
// a claim answered to nobody and reclaimed, would end dead-lettered.
func TestFaultHTTPWorkerResets(t *testing.T) {
	run(t, scenario{name: "http_worker_resets", workers: -1, httpWorkers: 2, maxAttempts: 1, visibility: 30 * time.Second,
		fault: func(t *testing.T, r *rig) {
			calls := [][]byte{[]byte(rdb.ScriptHash("finish_succeeded")), []byte(rdb.ScriptHash("claim"))}
			end := time.Now().Add(3 * time.Second)
			for i := 0; time.Now().Before(end); i++ {
				if i%2 == 0 {
					r.proxy.CutAfter(calls[(i/2)%2], 2)
				} else {
					r.proxy.CutBefore(calls[(i/2)%2], 2)
				}
				time.Sleep(150 * time.Millisecond)
				if i%4 == 3 {
					r.proxy.ResetAll()
				}
			}
			r.proxy.CutAfter(nil, 0)
			require.Positive(t, r.proxy.Cuts(), "no call was cut")
		}})
}

// TestFaultRefusedWrites makes Redis refuse every write for 2 s
// (maxmemory 1 under noeviction) while handlers keep returning success: one
// worker, max_attempts 1, a 3 s lease. Every success must land.
func TestFaultRefusedWrites(t *testing.T) {
	run(t, scenario{name: "refused_writes_2s", workers: 1, maxAttempts: 1, work: 300 * time.Millisecond, every: 100 * time.Millisecond,
		fault: func(t *testing.T, r *rig) {
			ctx := context.Background()
			require.NoError(t, r.direct.ConfigSet(ctx, "maxmemory", "1").Err())
			time.Sleep(2 * time.Second)
			require.NoError(t, r.direct.ConfigSet(ctx, "maxmemory", "0").Err())
		}})
}

// TestFaultOutage takes Redis away for 5 s (every connection reset, new
// ones refused) under load. Leases are longer than the outage.
func TestFaultOutage(t *testing.T) {
	run(t, scenario{name: "outage_5s", visibility: 9 * time.Second, keys: 3,
		limits: `{"concurrency": 10, "key_concurrency": 3}`, fault: func(t *testing.T, r *rig) {
			r.proxy.SetDown(true)
			time.Sleep(5 * time.Second)
			r.proxy.SetDown(false)
		}})
}

// TestFaultLatency adds 500 ms to every reply for 4 s under load.
func TestFaultLatency(t *testing.T) {
	run(t, scenario{name: "latency_500ms", fault: func(t *testing.T, r *rig) {
		r.proxy.SetLatency(500 * time.Millisecond)
		time.Sleep(4 * time.Second)
		r.proxy.SetLatency(0)
	}})
}

// TestFaultWorkerPaused stops a worker process with SIGSTOP while it runs
// tasks, until another worker has taken over one of its leases, then lets
// it go on (SIGCONT): its late outcomes are fenced out and the tasks end
// once.
func TestFaultWorkerPaused(t *testing.T) {
	run(t, scenario{name: "sigstop_past_lease", workers: 1, child: true, work: 300 * time.Millisecond, every: 100 * time.Millisecond,
		fault: pauseChildPastLease})
}

// pauseChildPastLease is the fault of TestFaultWorkerPaused.
func pauseChildPastLease(t *testing.T, r *rig) {
	ctx := context.Background()
	keys := rdb.NewKeys(r.prefix)
	// Stop it while it holds a lease (its handlers take 2 s), in any
	// partition of the queue.
	require.Eventually(t, func() bool {
		for _, part := range r.parts {
			ids, err := r.direct.ZRange(ctx, keys.Lease(part), 0, -1).Result()
			require.NoError(t, err)
			for _, id := range ids {
				if r.direct.HGet(ctx, keys.Task(part, id), "worker_id").Val() == "child" {
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 10*time.Millisecond, "the child worker never held a lease")
	start := map[string]string{}
	for _, part := range r.parts {
		last, err := r.direct.XRevRangeN(ctx, keys.Events(part), "+", "-", 1).Result()
		require.NoError(t, err)
		start[part] = "-"
		if len(last) > 0 {
			start[part] = last[0].ID
		}
	}
	require.NoError(t, r.child.Process.Signal(syscall.SIGSTOP))
	require.Eventually(t, func() bool {
		for _, part := range r.parts {
			evs, err := r.direct.XRange(ctx, keys.Events(part), start[part], "+").Result()
			require.NoError(t, err)
			for _, e := range evs {
				if e.Values["type"] == "TASK_LEASE_LOST" {
					return true
				}
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "no lease of the stopped worker was taken over")
	require.NoError(t, r.child.Process.Signal(syscall.SIGCONT))
}

// TestFaultRedisRestart kills Redis (SIGKILL) under load and starts it
// again on the same AOF (appendfsync always) a second later.
func TestFaultRedisRestart(t *testing.T) {
	run(t, scenario{name: "redis_restart_aof", visibility: 9 * time.Second,
		redisArgs: []string{"--appendonly", "yes", "--appendfsync", "always"},
		fault: func(t *testing.T, r *rig) {
			r.srv.Kill()
			time.Sleep(time.Second)
			require.NoError(t, r.srv.Restart())
		}})
}

// TestFaultStalledWorker keeps a worker's own leases expired while its
// handlers run (what a stall, a long GC pause or a clock step looks like
// from Redis): one worker, max_attempts 1. The worker must not take its own
// tasks over, nor dead-letter them as WorkerLost while it runs them.
func TestFaultStalledWorker(t *testing.T) {
	run(t, scenario{name: "stalled_worker", workers: 1, maxAttempts: 1, work: 500 * time.Millisecond, every: 100 * time.Millisecond,
		fault: func(t *testing.T, r *rig) {
			ctx := context.Background()
			lease := rdb.NewKeys(r.prefix).Lease(queue)
			end := time.Now().Add(5 * time.Second)
			for time.Now().Before(end) {
				ids, err := r.direct.ZRange(ctx, lease, 0, -1).Result()
				require.NoError(t, err)
				for _, id := range ids {
					r.direct.ZAddXX(ctx, lease, redisZ(0, id))
				}
				time.Sleep(50 * time.Millisecond)
			}
		}})
}
