package events

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/rdb"
)

// The feed's view of its streams. The reads themselves are in internal/rdb
// (streams.go), the wake-ups over many streams included. Each range read
// runs in MULTI with XINFO STREAM, so that "was anything after this id trimmed?" and "what comes after this id?" are
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

// unknownOrd is an ordinal nobody can tell.
const unknownOrd = -1

// An ordinal places a position in the stream's history: how many entries
// were ever added up to and including it (entries-added counts the same
// way). Knowing a position's ordinal turns "may have been trimmed" into an
// exact answer; without one the checks below err on the side of a reset.

// goneOrd is gone()'s ordinal, or unknownOrd when XDEL holes among the
// held entries make it unknowable.
func (s streamState) goneOrd() int64 {
	if s.length == 0 {
		return s.entriesAdded
	}
	if s.maxDeleted.less(s.first) {
		return s.entriesAdded - s.length
	}
	return unknownOrd
}

// trimmedAfter reports whether an entry after pos (whose ordinal is posOrd,
// or unknownOrd) may have been removed, that is, whether reading on from
// pos could skip events. Trimming removes the oldest entries first, so
// with a known ordinal and no XDEL after pos the answer is exact: entries
// after pos are gone when more entries were removed than existed up to pos.
// That matters after a stream was emptied: the next entry's predecessor is
// then gone, yet a reader that had read everything missed nothing.
func (s streamState) trimmedAfter(pos streamID, posOrd int64) bool {
	if !pos.less(s.gone()) {
		return false
	}
	if posOrd < 0 || pos.less(s.maxDeleted) || s.entriesAdded < posOrd {
		return true // no ordinal, a hole after pos, or another stream's history
	}
	return s.entriesAdded-s.length > posOrd
}

// firstOrd is the ordinal of firstID, the first of n entries (the last
// being lastID) read after pos (ordinal posOrd) in one read, or unknownOrd.
// The entries after it in that read follow it one by one.
func (s streamState) firstOrd(firstID, lastID streamID, n int, pos streamID, posOrd int64) int64 {
	if n == 0 || !s.maxDeleted.less(firstID) {
		return unknownOrd // XDEL holes may lie among them
	}
	ord := int64(unknownOrd)
	switch {
	case firstID == s.first:
		ord = s.entriesAdded - s.length + 1
	case lastID == s.lastGenerated:
		ord = s.entriesAdded - int64(n) + 1
	case posOrd >= 0 && !s.trimmedAfter(pos, posOrd):
		ord = posOrd + 1
	}
	if ord < 1 || ord+int64(n)-1 > s.entriesAdded {
		return unknownOrd
	}
	return ord
}

// readOrd is firstOrd for the messages of one read.
func (s streamState) readOrd(msgs []redis.XMessage, pos streamID, posOrd int64) int64 {
	if len(msgs) == 0 {
		return unknownOrd
	}
	first, err1 := parseStreamID(msgs[0].ID)
	last, err2 := parseStreamID(msgs[len(msgs)-1].ID)
	if err1 != nil || err2 != nil {
		return unknownOrd
	}
	return s.firstOrd(first, last, len(msgs), pos, posOrd)
}

// ordAt is the ordinal of the i-th entry of a read whose first is first.
func ordAt(first int64, i int) int64 {
	if first < 0 {
		return unknownOrd
	}
	return first + int64(i)
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

// redisNow returns Redis's clock, which stamps stream ids.
func redisNow(ctx context.Context, c redis.UniversalClient) (time.Time, error) {
	return rdb.ServerTime(ctx, c)
}
