package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// fairE2E is e2e over keyed tasks: n tasks spread round robin over keys
// concurrency keys, submitted first, then one worker timed until all are
// done; with fair, the queue has fairness set (equal weights), else no
// limits. The same build both ways: what fairness costs end to end.
func fairE2E(ctx context.Context, rc *redis.Client, n, concurrency, keys int, fair bool, payload any) result {
	if fair {
		a, err := open(rc, nil).NewAdmin(nil)
		if err != nil {
			panic(err)
		}
		if err := a.SetLimits(ctx, dtq.DefaultQueue, dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}}); err != nil {
			panic(err)
		}
	}
	c := newClient(rc)
	for done := 0; done < n; done += 1000 {
		subs := make([]dtq.Submission, min(1000, n-done))
		for i := range subs {
			subs[i] = dtq.Submission{Type: "noop", Payload: payload, ConcurrencyKey: "tenant-" + strconv.Itoa((done+i)%keys)}
		}
		if _, err := c.SubmitBatch(ctx, subs); err != nil {
			panic(err)
		}
	}
	w := newWorker(rc, concurrency)
	tick, allDone := countdown(n)
	w.HandleFunc("noop", func(ctx context.Context, t *dtq.Task) (any, error) { tick(); return nil, nil })
	before := readStats(ctx, rc)
	start := time.Now()
	stop := runWorker(ctx, w)
	<-allDone
	waitDrained(ctx, rc)
	el := time.Since(start)
	after := readStats(ctx, rc)
	stop()
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(),
		Note: fmt.Sprintf("keys=%d fair=%v concurrency=%d GOMAXPROCS=%d", keys, fair, concurrency, runtime.GOMAXPROCS(0))}
	charge(&r, before, after, int64(n))
	return r
}
