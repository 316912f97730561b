package main

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// clusterE2E runs the end-to-end scenario on a 3-master Redis Cluster with
// the tasks spread over queues (one or more per master) and reports each
// master's share of the Redis CPU spent.
func clusterE2E(ctx context.Context, n, concurrency, queues int, payload any) result {
	c, err := redistest.StartCluster(3, 0)
	if err != nil {
		panic(err)
	}
	defer c.Stop()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 256})
	defer cc.Close()
	d, err := dtq.Open(cc, nil)
	if err != nil {
		panic(err)
	}
	client, err := d.NewClient(&dtq.ClientConfig{MaxQueueDepth: 10_000_000})
	if err != nil {
		panic(err)
	}
	names := make([]string, queues)
	weights := map[string]int{}
	for i := range names {
		names[i] = fmt.Sprintf("q%d", i)
		weights[names[i]] = 1
	}
	for done := 0; done < n; done += 1000 {
		subs := make([]dtq.Submission, min(1000, n-done))
		for i := range subs {
			subs[i] = dtq.Submission{Queue: names[(done+i)%queues], Type: "noop", Payload: payload}
		}
		if _, err := client.SubmitBatch(ctx, subs); err != nil {
			panic(err)
		}
	}
	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: weights, Concurrency: concurrency, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	var count atomic.Int64
	allDone := make(chan struct{})
	var once sync.Once
	w.HandleFunc("noop", func(ctx context.Context, t *dtq.Task) (any, error) {
		if count.Add(1) >= int64(n) {
			once.Do(func() { close(allDone) })
		}
		return nil, nil
	})
	before := masterCPU(ctx, c)
	start := time.Now()
	stop := runWorker(ctx, w)
	<-allDone
	keys := rdb.NewKeys("dtq")
	for _, q := range names {
		for cc.Get(ctx, keys.Depth(q)).Val() != "0" {
			time.Sleep(time.Millisecond)
		}
	}
	el := time.Since(start)
	after := masterCPU(ctx, c)
	stop()
	var total float64
	addrs := make([]string, 0, len(after))
	for a := range after {
		total += after[a] - before[a]
		addrs = append(addrs, a)
	}
	sort.Strings(addrs)
	var shares []string
	for _, a := range addrs {
		shares = append(shares, fmt.Sprintf("%.0f%%", 100*(after[a]-before[a])/total))
	}
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(),
		CPUusPerTask: total * 1e6 / float64(n),
		Note:         fmt.Sprintf("3 masters, %d queues, concurrency=%d, per-master Redis CPU share %s", queues, concurrency, strings.Join(shares, " / "))}
	return r
}
