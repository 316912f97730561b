package rdb

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
