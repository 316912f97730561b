package rdb

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/redistest"
)

// BenchmarkFairLifecycle is BenchmarkLifecycleScripts over keyed tasks:
// DTQ_BENCH_KEYS keys (default 100), round robin, with fairness set unless
// DTQ_BENCH_FAIR is "off". Ingest writes b.N + 2*keys tasks, so that every
// key still has tasks ready while the b.N claims run (the claims see keys
// active keys); claim and succeed phases are per claimed task.
// bench/faircost.sh runs it under callgrind (DTQ_SCRIPT_COST_DUMPS), as
// scriptcost.sh runs BenchmarkLifecycleScripts.
func BenchmarkFairLifecycle(b *testing.B) {
	keys := 100
	if v, err := strconv.Atoi(os.Getenv("DTQ_BENCH_KEYS")); err == nil && v > 0 {
		keys = v
	}
	fair := os.Getenv("DTQ_BENCH_FAIR") != "off"
	s := redistest.New(b)
	r := New(s.Client, s.Prefix)
	ctx := context.Background()
	if err := r.EnsureGroups(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	if fair {
		if _, err := r.SetLimits(ctx, "bench", &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}}); err != nil {
			b.Fatal(err)
		}
	}
	ws := &WorkerSettings{WorkerID: "bench", Lease: 30 * time.Second, EventsMaxLen: 100000,
		SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 1000}
	dumps := os.Getenv("DTQ_SCRIPT_COST_DUMPS") != "" && b.N > 1
	phase := func(name string, per int) {
		if dumps {
			if out, err := exec.Command("callgrind_control", "-d", name).CombinedOutput(); err != nil {
				b.Fatalf("callgrind_control: %v: %s", err, out)
			}
		}
		info, err := s.Client.Info(ctx, "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(evalshaMicros(info)/float64(per), name+"-µs/task")
		if err := s.Client.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Now()
	total := b.N + 2*keys
	if err := s.Client.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < total; i += 200 {
		ts := benchTasks(min(200, total-i), now)
		for j := range ts {
			ts[j].ConcurrencyKey = "tenant-" + strconv.Itoa((i+j)%keys)
		}
		if _, err := r.Ingest(ctx, "bench", now, benchOpts, ts); err != nil {
			b.Fatal(err)
		}
	}
	phase("ingest", total)
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
	phase("claim", b.N)
	for _, done := range claimed {
		if _, err := r.FinishSucceeded(ctx, "bench", ws, now, done); err != nil {
			b.Fatal(err)
		}
	}
	phase("succeed", b.N)
}
