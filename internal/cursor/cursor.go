// Package cursor encodes and decodes the page cursors of dtq's lists and
// bulk actions. A cursor is opaque to its user: the URL-safe base64 of a
// format version, a tag naming the list it continues and that list's
// position, a few length-prefixed parts. Decoding checks all of it and each
// part's range before any Redis read, so a forged, altered or truncated
// cursor, or one from another list, is refused as ErrInvalid.
package cursor

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// ErrInvalid is the error of every cursor that is not one the list it is
// given to returned. dtq exports it as ErrInvalidCursor.
var ErrInvalid = errors.New("dtq: invalid cursor")

// Kind tags the list (or bulk action) a cursor continues.
type Kind byte

// The kinds of cursor. The values are part of the format: never reuse one.
const (
	Tasks     Kind = 't'
	DLQ       Kind = 'd'
	DLQBulk   Kind = 'b' // a bulk requeue or purge of dead letters
	Audit     Kind = 'a'
	Workers   Kind = 'w'
	Queues    Kind = 'q'
	Schedules Kind = 's'
	Workflows Kind = 'f'
)

// String names the list k continues, for error messages.
func (k Kind) String() string {
	switch k {
	case Tasks:
		return "task list"
	case DLQ:
		return "dead-letter list"
	case DLQBulk:
		return "dead-letter bulk action"
	case Audit:
		return "audit list"
	case Workers:
		return "worker list"
	case Queues:
		return "queue list"
	case Schedules:
		return "schedule list"
	case Workflows:
		return "workflow list"
	}
	return "unknown list " + strconv.Quote(string(rune(k)))
}

// version is the first byte of every cursor. A change of format takes the
// next one; cursors of another version are refused, so the lists restart.
const version = 1

// MaxLen bounds an encoded cursor; a longer one is refused before it is
// decoded. Cursors dtq makes are far shorter (a dead-letter position, the
// longest in practice, is under 200 bytes).
const MaxLen = 4 << 10

var enc = base64.RawURLEncoding

// Encode returns the cursor of kind k whose position is parts, in order.
func Encode(k Kind, parts ...string) string {
	b := []byte{version, byte(k)}
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return enc.EncodeToString(b)
}

// Reader reads a cursor's parts in the order Encode was given them,
// checking each. The first failure sticks: later reads return zero values
// and Err reports it.
type Reader struct {
	rest []byte
	err  error
}

// Read starts reading cursor c, which must be of kind k.
func Read(c string, k Kind) *Reader {
	if len(c) > MaxLen {
		return &Reader{err: fmt.Errorf("%w: longer than %d bytes", ErrInvalid, MaxLen)}
	}
	raw, err := enc.DecodeString(c)
	// The decoder skips newlines and unused trailing bits: a cursor must be
	// the one encoding of its bytes.
	if err != nil || enc.EncodeToString(raw) != c {
		return &Reader{err: fmt.Errorf("%w: not base64url", ErrInvalid)}
	}
	switch {
	case len(raw) < 2:
		return &Reader{err: fmt.Errorf("%w: too short", ErrInvalid)}
	case raw[0] != version:
		return &Reader{err: fmt.Errorf("%w: unknown version %d", ErrInvalid, raw[0])}
	case Kind(raw[1]) != k:
		return &Reader{err: fmt.Errorf("%w: it continues the %v, not the %v", ErrInvalid, Kind(raw[1]), k)}
	}
	return &Reader{rest: raw[2:]}
}

// maxPart bounds one part's length (a cursor is at most a few KiB).
const maxPart = 1 << 16

// part returns the next part's bytes.
func (r *Reader) part() ([]byte, bool) {
	if r.err != nil {
		return nil, false
	}
	u, w := binary.Uvarint(r.rest)
	// A part is never longer than a whole cursor may be.
	if w <= 0 || w != len(binary.AppendUvarint(nil, u)) || u > maxPart {
		r.err = fmt.Errorf("%w: malformed", ErrInvalid)
		return nil, false
	}
	n := int(u)
	if n > len(r.rest)-w {
		r.err = fmt.Errorf("%w: malformed", ErrInvalid)
		return nil, false
	}
	p := r.rest[w : w+n]
	r.rest = r.rest[w+n:]
	return p, true
}

// String reads the next part, which valid must accept.
func (r *Reader) String(valid func(string) bool) string {
	p, ok := r.part()
	if !ok {
		return ""
	}
	if s := string(p); valid(s) {
		return s
	}
	r.err = fmt.Errorf("%w: a part is out of range", ErrInvalid)
	return ""
}

// Int reads the next part as an integer in lo..hi, written as
// strconv.FormatInt writes it.
func (r *Reader) Int(lo, hi int64) int64 {
	p, ok := r.part()
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(string(p), 10, 64)
	if err != nil || n < lo || n > hi || strconv.FormatInt(n, 10) != string(p) {
		r.err = fmt.Errorf("%w: a number is out of range", ErrInvalid)
		return 0
	}
	return n
}

// Err returns the first failure, or ErrInvalid when parts remain unread.
func (r *Reader) Err() error {
	if r.err == nil && len(r.rest) > 0 {
		r.err = fmt.Errorf("%w: malformed", ErrInvalid)
	}
	return r.err
}
