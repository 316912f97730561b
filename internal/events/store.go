package events

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/rdb"
)

// The feed's view of its streams. The reads themselves are in internal/rdb
// (streams.go); each range read runs in MULTI with XINFO STREAM, so that
// "was anything after this id trimmed?" and "what comes after this id?" are
// answered at the same instant: a gap can never slip in between.
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

// toState interprets what XINFO STREAM said.
func toState(info rdb.StreamInfo) (streamState, error) {
	if !info.Exists {
		return streamState{}, nil
	}
	st := streamState{exists: true, length: info.Length, entriesAdded: info.EntriesAdded}
	for _, f := range []struct {
		dst *streamID
		src string
	}{
		{&st.lastGenerated, info.LastGeneratedID},
		{&st.maxDeleted, info.MaxDeletedID},
		{&st.first, info.FirstID},
	} {
		if f.src == "" {
			continue
		}
		var err error
		if *f.dst, err = parseStreamID(f.src); err != nil {
			return streamState{}, err
		}
	}
	return st, nil
}

// readAfter returns up to count entries of key after pos, with the stream's
// state at the same instant.
func readAfter(ctx context.Context, c redis.UniversalClient, key string, pos streamID, count int64) ([]redis.XMessage, streamState, error) {
	msgs, info, err := rdb.ReadStreamAfter(ctx, c, key, pos.String(), count)
	if err != nil {
		return nil, streamState{}, err
	}
	st, err := toState(info)
	return msgs, st, err
}

// streamTail returns the stream's state: where a reader that starts now
// begins.
func streamTail(ctx context.Context, c redis.UniversalClient, key string) (streamState, error) {
	info, err := rdb.StreamTail(ctx, c, key)
	if err != nil {
		return streamState{}, err
	}
	return toState(info)
}

// waitAfter blocks up to block until key holds an entry after pos; it
// returns redis.Nil when the time ran out.
func waitAfter(ctx context.Context, c redis.UniversalClient, key string, pos streamID, block time.Duration) error {
	return rdb.WaitStreamAfter(ctx, c, key, pos.String(), block)
}

// redisNow returns Redis's clock, which stamps stream ids.
func redisNow(ctx context.Context, c redis.UniversalClient) (time.Time, error) {
	return rdb.ServerTime(ctx, c)
}
