package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
)

// memoryRun says how the memory scenario keeps finished tasks.
type memoryRun struct {
	// retention is the succeeded retention: < 0 uses the system's default,
	// 0 keeps nothing (dtq only: asynq keeps nothing by default).
	retention time.Duration
	idem      bool // dtq: an idempotency key per task; asynq: TaskID
}

// memory measures what n completed no-op tasks leave in Redis: used_memory
// after the last one finished, minus used_memory before the first was
// submitted. Everything counts, the capped event stream included.
func memory(ctx context.Context, rc *redis.Client, n int, payload any, m memoryRun) result {
	c := newClient(rc)
	w := newWorkerWith(rc, 32, func(conf *dtq.DeploymentConfig) {
		switch {
		case m.retention == 0:
			conf.SucceededRetention = dtq.NoRetention
		case m.retention > 0:
			conf.SucceededRetention = m.retention
		}
	}, nil)
	tick, allDone := countdown(n)
	w.HandleFunc("noop", func(ctx context.Context, t *dtq.Task) (any, error) { tick(); return nil, nil })
	w.HandleFunc("warmup", func(ctx context.Context, t *dtq.Task) (any, error) { return nil, nil })
	// Register the queue and start the worker first: its groups and
	// registry are not what a task costs.
	stop := runWorker(ctx, w)
	if _, err := c.Submit(ctx, dtq.Submission{Type: "warmup"}); err != nil {
		panic(err)
	}
	waitDrained(ctx, rc)
	before := readStats(ctx, rc)
	start := time.Now()
	for sent := 0; sent < n; sent += 1000 {
		subs := make([]dtq.Submission, min(1000, n-sent))
		for i := range subs {
			subs[i] = dtq.Submission{Type: "noop", Payload: payload}
			if m.idem {
				subs[i].IdempotencyKey = "order-" + strconv.Itoa(sent+i)
			}
		}
		if _, err := c.SubmitBatch(ctx, subs); err != nil {
			panic(err)
		}
	}
	<-allDone
	waitDrained(ctx, rc)
	el := time.Since(start)
	after := readStats(ctx, rc)
	stop()
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(),
		Note: fmt.Sprintf("retention=%s idempotency=%t memory_after=%.1fMB events=%.1fMB recent=%.1fMB tasks=%.1fMB",
			retentionNote(m.retention), m.idem, float64(after.memory-before.memory)/1e6,
			float64(rc.MemoryUsage(ctx, "dtq:events:{default}", 0).Val())/1e6,
			float64(rc.MemoryUsage(ctx, "dtq:listing:{default}", 0).Val())/1e6,
			float64(keysMemory(ctx, rc, "dtq:task:*"))/1e6)}
	charge(&r, before, after, int64(n))
	r.BytesPerTask = float64(after.memory-before.memory) / float64(n)
	return r
}

func retentionNote(d time.Duration) string {
	if d < 0 {
		return "default"
	}
	return d.String()
}

// waitDrained waits until the default queue holds no unfinished task: the
// last finalize may still be in flight when the last handler returns.
func waitDrained(ctx context.Context, rc *redis.Client) {
	for rc.Get(ctx, "dtq:depth:{default}").Val() != "0" {
		time.Sleep(time.Millisecond)
	}
}

// asynqMemory is memory for asynq: its default deletes a task when it
// completes; retention > 0 is asynq.Retention, idem is asynq.TaskID.
func asynqMemory(ctx context.Context, rc *redis.Client, addr string, n int, payload []byte, m memoryRun) result {
	tick, allDone := countdown(n)
	warm := make(chan struct{}, 1)
	srv := asynqServer(addr, 32, 0)
	h := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		if t.Type() == "warmup" {
			warm <- struct{}{}
			return nil
		}
		tick()
		return nil
	})
	if err := srv.Start(h); err != nil {
		panic(err)
	}
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: addr, PoolSize: 64})
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: addr})
	if _, err := c.Enqueue(asynq.NewTask("warmup", payload)); err != nil {
		panic(err)
	}
	<-warm
	asynqWaitDrained(insp)
	before := readStats(ctx, rc)
	start := time.Now()
	for i := range n {
		var opts []asynq.Option
		if m.retention > 0 {
			opts = append(opts, asynq.Retention(m.retention))
		}
		if m.idem {
			opts = append(opts, asynq.TaskID("order-"+strconv.Itoa(i)))
		}
		if _, err := c.Enqueue(asynq.NewTask("noop", payload), opts...); err != nil {
			panic(err)
		}
	}
	<-allDone
	asynqWaitDrained(insp)
	el := time.Since(start)
	after := readStats(ctx, rc)
	c.Close()
	insp.Close()
	srv.Shutdown()
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(),
		Note: fmt.Sprintf("retention=%s taskid=%t memory_after=%.1fMB", retentionNote(m.retention), m.idem,
			float64(after.memory-before.memory)/1e6)}
	charge(&r, before, after, int64(n))
	r.BytesPerTask = float64(after.memory-before.memory) / float64(n)
	return r
}

// keysMemory sums MEMORY USAGE over the keys matching pattern.
func keysMemory(ctx context.Context, rc *redis.Client, pattern string) int64 {
	var total int64
	iter := rc.Scan(ctx, 0, pattern, 1000).Iterator()
	pipe := rc.Pipeline()
	var cmds []*redis.IntCmd
	for iter.Next(ctx) {
		cmds = append(cmds, pipe.MemoryUsage(ctx, iter.Val(), 0))
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range cmds {
		total += c.Val()
	}
	return total
}
