package events

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/dtq-io/dtq"
)

// maxCursorLen bounds the encoded cursor a client may send (it grows with
// the number of queues it has read).
const maxCursorLen = 1 << 20

// ErrBadCursor is returned by ParseCursor for a cursor this feed did not
// issue (or one that was altered).
var ErrBadCursor = errors.New("events: malformed cursor")

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
}

type wireCursor struct {
	V     int               `json:"v"`
	Start uint64            `json:"t"`
	Pos   map[string]string `json:"p,omitempty"`
}

// NewCursor returns a cursor with no positions that starts at start.
func NewCursor(start time.Time) *Cursor {
	ms := start.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	return &Cursor{start: uint64(ms), pos: map[string]streamID{}}
}

// ParseCursor decodes a cursor issued by String. It returns an error
// wrapping ErrBadCursor when s is not one.
func ParseCursor(s string) (*Cursor, error) {
	if len(s) > maxCursorLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadCursor, maxCursorLen)
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
	c := &Cursor{start: w.Start, pos: make(map[string]streamID, len(w.Pos))}
	for q, v := range w.Pos {
		if q != SysQueue && !dtq.ValidQueueName(q) {
			return nil, fmt.Errorf("%w: bad queue name", ErrBadCursor)
		}
		id, err := parseStreamID(v)
		if err != nil {
			return nil, fmt.Errorf("%w: bad position for queue %s", ErrBadCursor, q)
		}
		c.set(q, id)
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
	b, _ := json.Marshal(w) // strings and numbers only: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

// Start returns the time from which queues without a position are read.
func (c *Cursor) Start() time.Time { return time.UnixMilli(int64(c.start)) }

// position returns the last id consumed in queue: the stored one, or the
// one just before the start time.
func (c *Cursor) position(queue string) streamID {
	if id, ok := c.pos[queue]; ok {
		return id
	}
	return idBefore(c.start)
}

// set records id as the last one consumed in queue. The position just
// before the start time is implied and not stored, which keeps cursors of
// quiet queues out of the encoding.
func (c *Cursor) set(queue string, id streamID) {
	if id == idBefore(c.start) {
		delete(c.pos, queue)
		return
	}
	c.pos[queue] = id
}

func (c *Cursor) clone() *Cursor {
	return &Cursor{start: c.start, pos: maps.Clone(c.pos)}
}
