package rdb

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ListenCancels calls fn with the id of each task whose cancel request
// (cancel.lua) is published on the cancel channel of one of queues, until
// ctx ends. On Redis Cluster the channels are sharded (SPUBLISH): one
// SSUBSCRIBE may only name channels of one hash slot, so each slot gets a
// subscription of its own, which go-redis sends to the slot's master and
// moves after a failover; fn may then be called from several goroutines at
// once.
func (r *RDB) ListenCancels(ctx context.Context, queues []string, fn func(taskID string)) {
	bySlot := map[int][]string{}
	for _, q := range queues {
		ch := r.keys.CancelChannel(q)
		bySlot[HashSlot(ch)] = append(bySlot[HashSlot(ch)], ch)
	}
	var subs []*redis.PubSub
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		for _, chans := range bySlot {
			subs = append(subs, cc.SSubscribe(ctx, chans...))
		}
	} else {
		var all []string
		for _, chans := range bySlot {
			all = append(all, chans...)
		}
		subs = append(subs, r.c.Subscribe(ctx, all...))
	}
	var wg sync.WaitGroup
	for _, ps := range subs {
		wg.Go(func() {
			defer ps.Close()
			listen(ctx, ps.Channel(), fn)
		})
	}
	wg.Wait()
}

// listen calls fn with each message's payload until ctx ends or ch closes.
func listen(ctx context.Context, ch <-chan *redis.Message, fn func(string)) {
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			fn(m.Payload)
		}
	}
}
