package faultsuite_test

import (
	"testing"
	"time"
)

// The fault suite's scenarios on a queue of 4 partitions: keyed tasks in
// their keys' partitions, keyless ones spread, workers serving the queue
// by name. Every check of run holds on each partition.

// TestFaultPartitionedResets is TestFaultConnectionResetMidFinalize on a
// partitioned queue, with its rate and concurrency split between the
// partitions.
func TestFaultPartitionedResets(t *testing.T) {
	run(t, scenario{name: "partitioned_reset_mid_finalize", maxAttempts: 1, keys: 4, partitions: 4,
		limits: `{"rate": {"limit": 400, "period": "1s", "burst": 20}, "concurrency": 12, "key_concurrency": 2}`, fault: resetMidFinalize})
}

// TestFaultPartitionedOutage is TestFaultOutage on a partitioned queue.
func TestFaultPartitionedOutage(t *testing.T) {
	run(t, scenario{name: "partitioned_outage_5s", visibility: 9 * time.Second, keys: 3, partitions: 4,
		limits: `{"concurrency": 12, "key_concurrency": 3}`, fault: func(t *testing.T, r *rig) {
			r.proxy.SetDown(true)
			time.Sleep(5 * time.Second)
			r.proxy.SetDown(false)
		}})
}

// TestFaultPartitionedWorkerPaused is TestFaultWorkerPaused on a
// partitioned queue: the stopped child serves every partition.
func TestFaultPartitionedWorkerPaused(t *testing.T) {
	run(t, scenario{name: "partitioned_sigstop_past_lease", workers: 1, child: true, partitions: 4,
		work: 300 * time.Millisecond, every: 100 * time.Millisecond, fault: pauseChildPastLease})
}

// TestFaultPartitionedRedisRestart is TestFaultRedisRestart on a
// partitioned queue.
func TestFaultPartitionedRedisRestart(t *testing.T) {
	run(t, scenario{name: "partitioned_redis_restart_aof", visibility: 9 * time.Second, partitions: 4,
		redisArgs: []string{"--appendonly", "yes", "--appendfsync", "always"},
		fault: func(t *testing.T, r *rig) {
			r.srv.Kill()
			time.Sleep(time.Second)
			if err := r.srv.Restart(); err != nil {
				t.Fatal(err)
			}
		}})
}
