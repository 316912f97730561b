package events

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// streamID is a Redis stream entry id, "<ms>-<seq>". Ids order first by
// milliseconds, then by sequence.
type streamID struct {
	ms, seq uint64
}

var errBadStreamID = errors.New("not a stream id")

// parseStreamID parses "<ms>-<seq>". The bare "<ms>" form is refused: a
// cursor always carries full ids.
func parseStreamID(s string) (streamID, error) {
	msPart, seqPart, ok := strings.Cut(s, "-")
	if !ok {
		return streamID{}, errBadStreamID
	}
	ms, err := strconv.ParseUint(msPart, 10, 64)
	if err != nil {
		return streamID{}, errBadStreamID
	}
	seq, err := strconv.ParseUint(seqPart, 10, 64)
	if err != nil {
		return streamID{}, errBadStreamID
	}
	return streamID{ms: ms, seq: seq}, nil
}

// idBefore returns the greatest id below every id of millisecond ms, so that
// "everything after idBefore(ms)" means "everything from ms on".
func idBefore(ms uint64) streamID { return streamID{ms: ms}.prev() }

// prev returns the greatest id below a (0-0 for 0-0).
func (a streamID) prev() streamID {
	switch {
	case a.seq > 0:
		return streamID{ms: a.ms, seq: a.seq - 1}
	case a.ms > 0:
		return streamID{ms: a.ms - 1, seq: math.MaxUint64}
	}
	return a
}

func (a streamID) String() string {
	return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10)
}

// compare returns -1, 0 or +1 as a is before, equal to or after b.
func (a streamID) compare(b streamID) int {
	switch {
	case a.ms < b.ms:
		return -1
	case a.ms > b.ms:
		return 1
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

func (a streamID) less(b streamID) bool { return a.compare(b) < 0 }

func maxID(a, b streamID) streamID {
	if a.less(b) {
		return b
	}
	return a
}
