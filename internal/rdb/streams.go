package rdb

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Reads for the event feed. They take the client to use as an argument,
// because the feed keeps a separate client for its blocking reads.

// StreamInfo is what XINFO STREAM says about a stream (zero when the stream
// does not exist).
type StreamInfo struct {
	Exists          bool
	Length          int64
	EntriesAdded    int64  // every entry ever added (Redis ≥ 7.0)
	FirstID         string // the oldest entry held, "" when empty
	LastGeneratedID string // the newest id ever added
	MaxDeletedID    string // the newest id removed by XDEL (Redis ≥ 7.0)
}

func isNoSuchKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such key")
}

func streamInfo(cmd *redis.XInfoStreamCmd) (StreamInfo, error) {
	info, err := cmd.Result()
	if isNoSuchKey(err) {
		return StreamInfo{}, nil
	}
	if err != nil {
		return StreamInfo{}, err
	}
	return StreamInfo{Exists: true, Length: info.Length, EntriesAdded: info.EntriesAdded,
		FirstID: info.FirstEntry.ID, LastGeneratedID: info.LastGeneratedID, MaxDeletedID: info.MaxDeletedEntryID}, nil
}

// ReadStreamAfter returns up to count entries of key after the id after,
// with the stream's state at the same instant (one MULTI), so "was anything
// after this id trimmed?" and "what comes after it?" cannot disagree.
func ReadStreamAfter(ctx context.Context, c redis.UniversalClient, key, after string, count int64) ([]redis.XMessage, StreamInfo, error) {
	var (
		info *redis.XInfoStreamCmd
		rng  *redis.XMessageSliceCmd
	)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		info = p.XInfoStream(ctx, key)
		rng = p.XRangeN(ctx, key, "("+after, "+", count)
		return nil
	})
	if err != nil && !isNoSuchKey(err) {
		return nil, StreamInfo{}, err
	}
	st, err := streamInfo(info)
	if err != nil {
		return nil, StreamInfo{}, err
	}
	msgs, err := rng.Result()
	if err != nil {
		return nil, StreamInfo{}, err
	}
	return msgs, st, nil
}

// StreamTail returns the stream's state: where a reader that starts now
// begins.
func StreamTail(ctx context.Context, c redis.UniversalClient, key string) (StreamInfo, error) {
	return streamInfo(c.XInfoStream(ctx, key))
}

// WaitStreamAfter blocks up to block until key holds an entry after the id
// after. It only wakes the caller; it returns redis.Nil when time ran out.
func WaitStreamAfter(ctx context.Context, c redis.UniversalClient, key, after string, block time.Duration) error {
	err := c.XRead(ctx, &redis.XReadArgs{Streams: []string{key, after}, Count: 1, Block: block}).Err()
	if errors.Is(err, redis.Nil) {
		return redis.Nil
	}
	return err
}

// ServerTime returns Redis's clock, which stamps stream ids.
func ServerTime(ctx context.Context, c redis.UniversalClient) (time.Time, error) {
	return c.Time(ctx).Result()
}

// Wake-ups over many streams: the event feed's readers and the workflow
// relays follow the streams of every queue with a number of connections
// that does not grow with the number of queues.

// WaitAnyStream blocks up to block until some of keys holds an entry after
// the id at the same index of after, and returns the indexes of those keys
// (none when the time ran out). One XREAD names every key, so they must
// share a slot on Redis Cluster; on a single Redis any keys will do (see
// DedicatedOptions).
func WaitAnyStream(ctx context.Context, c redis.UniversalClient, keys, after []string, block time.Duration) ([]int, error) {
	streams := make([]string, 0, 2*len(keys))
	streams = append(append(streams, keys...), after...)
	res, err := c.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: 1, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	index := make(map[string]int, len(keys))
	for i, k := range keys {
		index[k] = i
	}
	var woke []int
	for _, s := range res {
		if i, ok := index[s.Stream]; ok && len(s.Messages) > 0 {
			woke = append(woke, i)
		}
	}
	return woke, nil
}

// PollAnyStream returns the indexes of the keys that hold an entry after
// the id at the same index of after, without blocking: one pipeline of one
// XREAD per key, which a cluster client sends as one pipeline per node. The
// indexes found are returned even when some reads failed.
func PollAnyStream(ctx context.Context, c redis.UniversalClient, keys, after []string) ([]int, error) {
	cmds := make([]*redis.XStreamSliceCmd, len(keys))
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.XRead(ctx, &redis.XReadArgs{Streams: []string{k, after[i]}, Count: 1, Block: -1})
		}
		return nil
	}) // each command's error is looked at below
	var (
		woke     []int
		firstErr error
	)
	for i, cmd := range cmds {
		res, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
		case len(res) > 0 && len(res[0].Messages) > 0:
			woke = append(woke, i)
		}
	}
	return woke, firstErr
}

// DedicatedOptions returns the options of a client of one connection to
// the same server as c, for a goroutine's blocking reads over many streams
// (WaitAnyStream), and true; or nil and false where one XREAD cannot block
// on the streams of several queues (Redis Cluster: CROSSSLOT, even when one
// node holds them all), where callers poll with PollAnyStream instead.
func DedicatedOptions(c redis.UniversalClient) (*redis.Options, bool) {
	single, ok := c.(*redis.Client) // a single Redis, or a Sentinel-managed one
	if !ok {
		return nil, false
	}
	opt := *single.Options()
	// One connection, used by one goroutine alone; its MULTIs must not open
	// a second one in a pipeline pool.
	opt.PoolSize, opt.MinIdleConns, opt.MaxIdleConns, opt.MaxActiveConns = 1, 0, 1, 1
	opt.PipelinePoolSize = -1
	// Per-client machinery that must not be shared with c, and that plain
	// stream reads do not need.
	opt.PushNotificationProcessor = nil
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	opt.ClientSideCache, opt.ClientSideCacheConfig = nil, nil
	return &opt, true
}
