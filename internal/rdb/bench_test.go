package rdb

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

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
		TaskRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 1000}
	const batch = 32
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		b.StopTimer()
		now := time.Now()
		if _, err := r.Ingest(ctx, "bench", now, benchOpts, benchTasks(batch, now)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		cr, err := r.Claim(ctx, "bench", ws, batch, now)
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
