package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
)

// progressWork is how long each task of the progress scenario runs: ten
// steps of a tenth each, so a reporting task reports ten times and the
// worker writes about twice (a tick, and once before the finalize).
const progressWork = time.Second

// progressLine is the line a reporting task logs at each step: 100 bytes
// as stored (the text handler's "level=INFO msg=" prefix included).
var progressLine = strings.Repeat("x", 100-len("level=INFO msg="))

// progressBench measures what progress reporting costs: n tasks of
// progressWork each, run concurrency at a time, once without reporting
// and once with a progress update and a log line at every step, on two
// queues of one Redis. It prints both runs' throughput and Redis CPU per
// task, and the Redis bytes per stored log line.
func progressBench(ctx context.Context, rc *redis.Client, n, concurrency int) result {
	off := progressRun(ctx, rc, "progress-off", n, concurrency, false)
	on := progressRun(ctx, rc, "progress-on", n, concurrency, true)
	lines := int64(n) * 10
	mem := keysMemory(ctx, rc, "dtq:task:{progress-on}:*:log:*")
	r := on
	r.BytesPerTask = float64(mem) / float64(n)
	r.Note = fmt.Sprintf("concurrency=%d, tasks of %v; without progress %.0f tasks/s, %.1fµs Redis CPU and %.1f commands per task; "+
		"with a progress update and a %d-byte line every %v: %.0f tasks/s (%+.1f%%), %.1fµs and %.1f commands per task; "+
		"%.1f Redis bytes per stored line (%d lines)",
		concurrency, progressWork, off.PerSecond, off.CPUusPerTask, off.CmdsPerTask,
		len(progressLine)+len("level=INFO msg="), progressWork/10, on.PerSecond, (on.PerSecond/off.PerSecond-1)*100,
		on.CPUusPerTask, on.CmdsPerTask, float64(mem)/float64(lines), lines)
	return r
}

// progressRun runs n tasks on queue and measures them, reporting or not.
func progressRun(ctx context.Context, rc *redis.Client, queue string, n, concurrency int, report bool) result {
	c := newClient(rc)
	for done := 0; done < n; done += 1000 {
		subs := make([]dtq.Submission, min(1000, n-done))
		for i := range subs {
			subs[i] = dtq.Submission{Type: "step", Queue: queue}
		}
		if _, err := c.SubmitBatch(ctx, subs); err != nil {
			panic(err)
		}
	}
	w := newWorkerWith(rc, concurrency, nil, func(conf *dtq.WorkerConfig) { conf.Queues = map[string]int{queue: 1} })
	tick, allDone := countdown(n)
	w.HandleFunc("step", func(ctx context.Context, t *dtq.Task) (any, error) {
		step := time.NewTicker(progressWork / 10)
		defer step.Stop()
		for i := 1; i <= 10; i++ {
			<-step.C
			if report {
				if err := dtq.Progress(ctx, i*10); err != nil {
					return nil, err
				}
				dtq.Logger(ctx).Info(progressLine)
			}
		}
		tick()
		return nil, nil
	})
	before := readStats(ctx, rc)
	start := time.Now()
	stop := runWorker(ctx, w)
	<-allDone
	depth := "dtq:depth:{" + queue + "}"
	for rc.Get(ctx, depth).Val() != "0" {
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	after := readStats(ctx, rc)
	stop()
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds()}
	charge(&r, before, after, int64(n))
	return r
}
