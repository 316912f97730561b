package rdb

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/redistest"
)

// Hot-path benchmarks against a real redis-server: they show regressions in
// the scripts' cost per task (go test -bench . ./internal/rdb).

func benchTasks(n int, now time.Time) []NewTask {
	payload := []byte(`{"data":"` + strings.Repeat("x", 80) + `"}`)
	ts := make([]NewTask, n)
	for i := range ts {
		ts[i] = NewTask{ID: NewTaskID(1, now), Type: "noop", Payload: payload, Priority: 5, MaxAttempts: 5,
			TimeoutMS: 30000, AvailableAt: now.UnixMilli(), CreatedAt: now.UnixMilli(), IdemTTL: 86400}
	}
	return ts
}

var benchOpts = IngestOptions{MaxDepth: 1 << 40, EventsMaxLen: 100000, RecentCap: 100000}

func BenchmarkIngest(b *testing.B) {
	for _, batch := range []int{1, 64} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			s := redistest.New(b)
			r := New(s.Client, s.Prefix)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i += batch {
				now := time.Now()
				if _, err := r.Ingest(ctx, "bench", now, benchOpts, benchTasks(batch, now)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClaimSucceed measures a claim of 32 tasks and their batched
// success finalize, per task.
func BenchmarkClaimSucceed(b *testing.B) {
	s := redistest.New(b)
	r := New(s.Client, s.Prefix)
	ctx := context.Background()
	if err := r.EnsureGroups(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	ws := &WorkerSettings{WorkerID: "bench", Lease: 30 * time.Second, EventsMaxLen: 100000,
		SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 1000}
	const batch = 32
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		b.StopTimer()
		now := time.Now()
		if _, err := r.Ingest(ctx, "bench", now, benchOpts, benchTasks(batch, now)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cr, err := r.Claim(ctx, "bench", ws, batch, now, "")
		if err != nil {
			b.Fatal(err)
		}
		done := make([]Success, len(cr.Tasks))
		for j, t := range cr.Tasks {
			done[j] = Success{ID: t.ID, Attempt: t.Attempt}
		}
		if _, err := r.FinishSucceeded(ctx, "bench", ws, now, done); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLifecycleScripts runs b.N tasks through ingest (200 a call),
// claim (32 a call) and success finalize (the claimed batch), one phase
// after the other, and reports each phase's Redis-side script time per task
// from INFO commandstats (the EVALSHA time, which excludes network I/O):
// ingest-µs/task, claim-µs/task, succeed-µs/task.
//
// With DTQ_SCRIPT_COST_DUMPS set it also calls `callgrind_control -d
// <phase>` after each phase: bench/scriptcost.sh runs the benchmark against
// a redis-server under callgrind and turns the dumps into instructions per
// task, a count that does not move with the machine's load.
func BenchmarkLifecycleScripts(b *testing.B) {
	s := redistest.New(b)
	r := New(s.Client, s.Prefix)
	ctx := context.Background()
	if err := r.EnsureGroups(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	// DTQ_SCRIPT_COST_EVENTS sets the queue's event detail (bench/scriptcost.sh's EVENTS).
	if ev := os.Getenv("DTQ_SCRIPT_COST_EVENTS"); ev != "" {
		if _, err := r.SetLimits(ctx, "bench", &dtqtype.QueueLimits{Events: ev}); err != nil {
			b.Fatal(err)
		}
	}
	ws := &WorkerSettings{WorkerID: "bench", Lease: 30 * time.Second, EventsMaxLen: 100000,
		SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 1000}
	// The first, one-task round only sizes b.N: no dumps there.
	dumps := os.Getenv("DTQ_SCRIPT_COST_DUMPS") != "" && b.N > 1
	phase := func(name string) {
		if dumps {
			if out, err := exec.Command("callgrind_control", "-d", name).CombinedOutput(); err != nil {
				b.Fatalf("callgrind_control: %v: %s", err, out)
			}
		}
		info, err := s.Admin.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(evalshaMicros(info)/float64(b.N), name+"-µs/task")
		if err := s.Admin.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Now()
	if err := s.Admin.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += 200 {
		if _, err := r.Ingest(ctx, "bench", now, benchOpts, benchTasks(min(200, b.N-i), now)); err != nil {
			b.Fatal(err)
		}
	}
	phase("ingest")
	var claimed [][]Success
	for i := 0; i < b.N; i += 32 {
		cr, err := r.Claim(ctx, "bench", ws, min(32, b.N-i), now, "")
		if err != nil {
			b.Fatal(err)
		}
		done := make([]Success, len(cr.Tasks))
		for j, t := range cr.Tasks {
			done[j] = Success{ID: t.ID, Attempt: t.Attempt}
		}
		claimed = append(claimed, done)
	}
	phase("claim")
	for _, done := range claimed {
		if _, err := r.FinishSucceeded(ctx, "bench", ws, now, done); err != nil {
			b.Fatal(err)
		}
	}
	phase("succeed")
}

// evalshaMicros reads the total EVALSHA time (µs) from INFO commandstats.
func evalshaMicros(info string) float64 {
	for line := range strings.SplitSeq(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") {
			continue
		}
		for kv := range strings.SplitSeq(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"), ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				n, _ := strconv.ParseFloat(v, 64)
				return n
			}
		}
	}
	return 0
}
