package events

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/dtq-io/dtq/internal/rdb"
)

// MaxCursorLen bounds the encoded cursor a client may send (docs/security.md): a
// cursor is parsed before anything else and echoed in every frame, so its
// size must not be the client's choice.
const MaxCursorLen = 4 << 10

// ErrBadCursor is returned by ParseCursor for a cursor this feed did not
// issue (or one that was altered).
var ErrBadCursor = errors.New("events: malformed cursor")

// ErrCursorTooLong is returned (wrapping ErrBadCursor) by ParseCursor for a
// cursor longer than MaxCursorLen.
var ErrCursorTooLong = fmt.Errorf("%w: longer than %d bytes", ErrBadCursor, MaxCursorLen)

// Cursor is a position in the whole feed: for each queue, the id of the
// last stream entry consumed, plus the time the cursor was first issued.
// Queues it holds no position for are read from that start time, so a
// queue created after the cursor was issued is read from its beginning.
//
// Cursors are opaque to clients: base64url of a small JSON document. A
// Cursor is not safe for concurrent use.
type Cursor struct {
	start uint64 // epoch ms, on Redis's clock
	pos   map[string]streamID
	ord   map[string]int64 // the positions' ordinals, where known (store.go)
}

type wireCursor struct {
	V     int               `json:"v"`
	Start uint64            `json:"t"`
	Pos   map[string]string `json:"p,omitempty"`
	Ord   map[string]int64  `json:"o,omitempty"`
}

// NewCursor returns a cursor with no positions that starts at start.
func NewCursor(start time.Time) *Cursor {
	ms := max(start.UnixMilli(), 0)
	return &Cursor{start: uint64(ms), pos: map[string]streamID{}, ord: map[string]int64{}}
}

// ParseCursor decodes a cursor issued by String. It returns an error
// wrapping ErrBadCursor when s is not one.
func ParseCursor(s string) (*Cursor, error) {
	if len(s) > MaxCursorLen {
		return nil, ErrCursorTooLong
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not base64url", ErrBadCursor)
	}
	var w wireCursor
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, fmt.Errorf("%w: not a cursor document", ErrBadCursor)
	}
	if w.V != 1 {
		return nil, fmt.Errorf("%w: unknown version %d", ErrBadCursor, w.V)
	}
	c := &Cursor{start: w.Start, pos: make(map[string]streamID, len(w.Pos)), ord: make(map[string]int64, len(w.Ord))}
	for q, v := range w.Pos {
		if q != SysQueue && !rdb.ValidStorageName(q) { // a queue, or a partition of one

			return nil, fmt.Errorf("%w: bad queue name", ErrBadCursor)
		}
		id, err := parseStreamID(v)
		if err != nil {
			return nil, fmt.Errorf("%w: bad position for queue %s", ErrBadCursor, q)
		}
		ord, ok := w.Ord[q]
		if !ok {
			ord = unknownOrd
		} else if ord < 0 {
			return nil, fmt.Errorf("%w: bad ordinal for queue %s", ErrBadCursor, q)
		}
		c.setAt(q, id, ord)
	}
	return c, nil
}

// String encodes the cursor; ParseCursor reverses it.
func (c *Cursor) String() string {
	w := wireCursor{V: 1, Start: c.start}
	if len(c.pos) > 0 {
		w.Pos = make(map[string]string, len(c.pos))
		for q, id := range c.pos {
			w.Pos[q] = id.String()
		}
	}
	if len(c.ord) > 0 {
		w.Ord = c.ord
	}
	b := mustJSON(w)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Start returns the time from which queues without a position are read.
func (c *Cursor) Start() time.Time { return time.UnixMilli(int64(min(c.start, math.MaxInt64))) }

// position returns the last id consumed in queue: the stored one, or the
// one just before the start time.
func (c *Cursor) position(queue string) streamID {
	if id, ok := c.pos[queue]; ok {
		return id
	}
	return idBefore(c.start)
}

// ordinal returns the ordinal of the position in queue, or unknownOrd.
func (c *Cursor) ordinal(queue string) int64 {
	if o, ok := c.ord[queue]; ok {
		return o
	}
	return unknownOrd
}

// set records id as the last one consumed in queue, its ordinal unknown.
func (c *Cursor) set(queue string, id streamID) { c.setAt(queue, id, unknownOrd) }

// setAt records id, whose ordinal is ord (or unknownOrd), as the last one
// consumed in queue. The position just before the start time is implied
// and not stored, which keeps cursors of quiet queues out of the encoding.
func (c *Cursor) setAt(queue string, id streamID, ord int64) {
	if id == idBefore(c.start) {
		delete(c.pos, queue)
		delete(c.ord, queue)
		return
	}
	c.pos[queue] = id
	if ord < 0 {
		delete(c.ord, queue)
	} else {
		c.ord[queue] = ord
	}
}

func (c *Cursor) clone() *Cursor {
	return &Cursor{start: c.start, pos: maps.Clone(c.pos), ord: maps.Clone(c.ord)}
}
