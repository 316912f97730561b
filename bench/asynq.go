package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The asynq scenarios mirror dtq's on the same private Redis, through
// asynq's public API with its defaults unless a flag says otherwise.

type quietLogger struct{}

func (quietLogger) Debug(args ...any) {}
func (quietLogger) Info(args ...any)  {}
func (quietLogger) Warn(args ...any)  {}
func (quietLogger) Error(args ...any) {}
func (quietLogger) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

func asynqEnqueue(ctx context.Context, rc *redis.Client, addr string, n, producers int, payload []byte, idem bool) result {
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: addr, PoolSize: 64})
	defer c.Close()
	// Load its scripts outside the measured phase, as dtq's warm-up does.
	if _, err := c.Enqueue(asynq.NewTask("warmup", payload), asynq.Queue("warmup")); err != nil {
		panic(err)
	}
	return measureEnqueue(ctx, rc, n, producers, fmt.Sprintf("producers=%d taskid=%t", producers, idem),
		func(i int64) error {
			var opts []asynq.Option
			if idem {
				opts = append(opts, asynq.TaskID("order-"+strconv.FormatInt(i, 10)))
			}
			_, err := c.Enqueue(asynq.NewTask("noop", payload), opts...)
			return err
		})
}

// asynqProduceConsume is produceConsume for asynq.
func asynqProduceConsume(ctx context.Context, rc *redis.Client, addr string, n, producers, concurrency int, payload []byte) result {
	tick, allDone := countdown(n)
	srv := asynqServer(addr, concurrency, 0)
	h := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error { tick(); return nil })
	if err := srv.Start(h); err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: addr, PoolSize: 64})
	defer c.Close()
	before := readStats(ctx, rc)
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := c.Enqueue(asynq.NewTask("noop", payload)); err != nil {
					panic(err)
				}
			}
		})
	}
	<-allDone
	wg.Wait()
	el := time.Since(start)
	after := readStats(ctx, rc)
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(),
		Note: fmt.Sprintf("producers=%d concurrency=%d, first submit to last completion", producers, concurrency)}
	charge(&r, before, after, int64(n))
	return r
}

// asynqWaitDrained waits until asynq's default queue has nothing pending
// or active: the last completion may still be in flight when the last
// handler returns.
func asynqWaitDrained(insp *asynq.Inspector) {
	for {
		qi, err := insp.GetQueueInfo("default")
		if err == nil && qi.Active == 0 && qi.Pending == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func asynqServer(addr string, concurrency int, poll time.Duration) *asynq.Server {
	cfg := asynq.Config{Concurrency: concurrency, Logger: quietLogger{}, LogLevel: asynq.FatalLevel}
	if poll > 0 {
		cfg.TaskCheckInterval = poll
	}
	return asynq.NewServer(asynq.RedisClientOpt{Addr: addr, PoolSize: 64}, cfg)
}

func asynqE2E(ctx context.Context, rc *redis.Client, addr string, n, concurrency int, payload []byte) result {
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: addr, PoolSize: 64})
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if _, err := c.Enqueue(asynq.NewTask("noop", payload)); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	c.Close()
	tick, allDone := countdown(n)
	srv := asynqServer(addr, concurrency, 0)
	h := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error { tick(); return nil })
	before := readStats(ctx, rc)
	start := time.Now()
	if err := srv.Start(h); err != nil {
		panic(err)
	}
	<-allDone
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: addr})
	asynqWaitDrained(insp)
	el := time.Since(start)
	after := readStats(ctx, rc)
	insp.Close()
	srv.Shutdown()
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(), Note: fmt.Sprintf("concurrency=%d", concurrency)}
	charge(&r, before, after, int64(n))
	return r
}

func asynqLatency(ctx context.Context, rc *redis.Client, addr string, rate int, d time.Duration, concurrency int, poll time.Duration) result {
	var mu sync.Mutex
	var lat []float64
	srv := asynqServer(addr, concurrency, poll)
	h := asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		var p struct{ SentNS int64 }
		_ = json.Unmarshal(t.Payload(), &p)
		ms := float64(time.Now().UnixNano()-p.SentNS) / 1e6
		mu.Lock()
		lat = append(lat, ms)
		mu.Unlock()
		return nil
	})
	if err := srv.Start(h); err != nil {
		panic(err)
	}
	defer srv.Shutdown()
	c := asynq.NewClient(asynq.RedisClientOpt{Addr: addr, PoolSize: 64})
	defer c.Close()
	stamp := func() []byte { b, _ := json.Marshal(map[string]int64{"SentNS": time.Now().UnixNano()}); return b }
	time.Sleep(500 * time.Millisecond)
	before := readStats(ctx, rc)
	interval := time.Second / time.Duration(rate)
	total := int(d / interval)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range total {
		if s := time.Until(start.Add(time.Duration(i) * interval)); s > 0 {
			time.Sleep(s)
		}
		wg.Go(func() {
			if _, err := c.Enqueue(asynq.NewTask("stamp", stamp())); err != nil {
				panic(err)
			}
		})
	}
	wg.Wait()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got >= total {
			break
		}
	}
	el := time.Since(start)
	after := readStats(ctx, rc)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	p := func(q float64) float64 {
		if len(lat) == 0 {
			return math.NaN()
		}
		return lat[int(math.Min(float64(len(lat)-1), q*float64(len(lat))))]
	}
	pollNote := "default polling"
	if poll > 0 {
		pollNote = "TaskCheckInterval=" + poll.String()
	}
	r := result{Tasks: int64(total), Seconds: el.Seconds(), PerSecond: float64(total) / el.Seconds(),
		P50ms: p(0.5), P99ms: p(0.99), Note: fmt.Sprintf("open loop at %d/s, %s", rate, pollNote)}
	charge(&r, before, after, int64(total))
	return r
}
