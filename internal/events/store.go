package events

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The feed's Redis reads. Each range read runs in MULTI with XINFO STREAM,
// so that "was anything after this id trimmed?" and "what comes after this
// id?" are answered at the same instant: a gap can never slip in between.
//
// Trimming (XADD MAXLEN) does not update XINFO's max-deleted-entry-id, only
// XDEL does; a trim shows as entries-added exceeding the length, with the
// first entry held telling how far it went.

// streamState is what XINFO STREAM says about an event stream.
type streamState struct {
	exists        bool
	length        int64
	entriesAdded  int64    // every entry ever added (Redis ≥ 7.0)
	first         streamID // the oldest entry held, when length > 0
	lastGenerated streamID // the newest id ever added
	maxDeleted    streamID // the newest id removed by XDEL (Redis ≥ 7.0)
}

// gone returns an id at or after every removed entry's: when entries were
// removed, the one just before the oldest entry held (trimming removes the
// oldest first), or the newest id when nothing is held. Reading on from a
// position before it may skip removed events. It errs on the safe side: a
// position exactly at the last removed entry also counts as behind.
func (s streamState) gone() streamID {
	g := s.maxDeleted
	if s.entriesAdded > s.length {
		if s.length == 0 {
			g = maxID(g, s.lastGenerated)
		} else {
			g = maxID(g, s.first.prev())
		}
	}
	return g
}

// trimmedAfter reports whether an entry after pos may have been removed,
// that is, whether reading on from pos could skip events.
func (s streamState) trimmedAfter(pos streamID) bool {
	return pos.less(s.gone())
}

func isNoSuchKey(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such key")
}

func toState(cmd *redis.XInfoStreamCmd) (streamState, error) {
	info, err := cmd.Result()
	if isNoSuchKey(err) {
		return streamState{}, nil
	}
	if err != nil {
		return streamState{}, err
	}
	st := streamState{exists: true, length: info.Length, entriesAdded: info.EntriesAdded}
	for _, f := range []struct {
		dst *streamID
		src string
	}{
		{&st.lastGenerated, info.LastGeneratedID},
		{&st.maxDeleted, info.MaxDeletedEntryID},
		{&st.first, info.FirstEntry.ID},
	} {
		if f.src == "" {
			continue
		}
		if *f.dst, err = parseStreamID(f.src); err != nil {
			return streamState{}, err
		}
	}
	return st, nil
}

// readAfter returns up to count entries of key after pos, with the stream's
// state at the same instant.
func readAfter(ctx context.Context, c redis.UniversalClient, key string, pos streamID, count int64) ([]redis.XMessage, streamState, error) {
	var (
		info *redis.XInfoStreamCmd
		rng  *redis.XMessageSliceCmd
	)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		info = p.XInfoStream(ctx, key)
		rng = p.XRangeN(ctx, key, "("+pos.String(), "+", count)
		return nil
	})
	if err != nil && !isNoSuchKey(err) {
		return nil, streamState{}, err
	}
	st, err := toState(info)
	if err != nil {
		return nil, streamState{}, err
	}
	msgs, err := rng.Result()
	if err != nil {
		return nil, streamState{}, err
	}
	return msgs, st, nil
}

// streamTail returns the stream's state: where a reader that starts now
// begins.
func streamTail(ctx context.Context, c redis.UniversalClient, key string) (streamState, error) {
	return toState(c.XInfoStream(ctx, key))
}

// waitAfter blocks up to block until key holds an entry after pos. It only
// wakes the caller, which then reads with readAfter; it returns redis.Nil
// when the time ran out.
func waitAfter(ctx context.Context, c redis.UniversalClient, key string, pos streamID, block time.Duration) error {
	err := c.XRead(ctx, &redis.XReadArgs{Streams: []string{key, pos.String()}, Count: 1, Block: block}).Err()
	if errors.Is(err, redis.Nil) {
		return redis.Nil
	}
	return err
}

// redisNow returns Redis's clock, which stamps stream ids.
func redisNow(ctx context.Context, c redis.UniversalClient) (time.Time, error) {
	return c.Time(ctx).Result()
}
