package rdb

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Task ids are UUIDv7 written as 32 lowercase hex digits. The 48-bit
// millisecond timestamp comes first, so ids sort by creation time; the last 16
// random bits are replaced by the queue's registry number, so an id names its
// queue without any lookup key. rand_a (12 bits) is a per-process sequence
// within one millisecond to keep ids from one process strictly ordered.

var idState struct {
	sync.Mutex
	lastMS int64
	seq    uint16
}

// NewTaskID returns a fresh task id for the queue numbered queueNum.
func NewTaskID(queueNum uint16, now time.Time) string {
	ms := now.UnixMilli()
	idState.Lock()
	if ms <= idState.lastMS {
		idState.seq++
		if idState.seq > 0x0fff { // sequence exhausted: borrow the next millisecond
			idState.lastMS++
			idState.seq = 0
		}
		ms = idState.lastMS
	} else {
		idState.lastMS = ms
		idState.seq = 0
	}
	seq := idState.seq
	idState.Unlock()

	var b [16]byte
	// 48 bits of milliseconds, the version nibble and 12 bits of sequence.
	binary.BigEndian.PutUint64(b[:8], uint64(max(ms, 0))<<16|0x7000|uint64(seq&0x0fff))
	_, _ = rand.Read(b[8:14])
	b[8] = 0x80 | (b[8] & 0x3f) // RFC 9562 variant
	binary.BigEndian.PutUint16(b[14:], queueNum)
	return hex.EncodeToString(b[:])
}

// ParseTaskID checks that id is a dtq task id and returns its queue number.
func ParseTaskID(id string) (queueNum uint16, ok bool) {
	if len(id) != 32 {
		return 0, false
	}
	for i := range len(id) {
		if !lowerHexByte(id[i]) {
			return 0, false
		}
	}
	if id[12] != '7' {
		return 0, false
	}
	for i := 28; i < 32; i++ { // the last four digits; every ingest call reads them
		queueNum = queueNum<<4 | uint16(hexValue(id[i]))
	}
	return queueNum, true
}

// hexValue is the value of the lowercase hex digit c.
func hexValue(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// lowerHexByte reports whether c is a lowercase hex digit: task ids are
// written (NewTaskID) and accepted (ParseTaskID) in lowercase only.
func lowerHexByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
}

// TaskIDTime returns the creation time encoded in a task id.
func TaskIDTime(id string) time.Time {
	var b [8]byte
	if len(id) < 12 {
		return time.Time{}
	}
	if _, err := hex.Decode(b[2:], []byte(id[:12])); err != nil {
		return time.Time{}
	}
	// 48 bits: always within int64.
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:]) & (1<<48 - 1)))
}

// The listing index holds ids without their last four digits, which are
// the queue's number and so the same in every id of one queue's index: 28
// bytes fit Redis a smaller allocation than 32.
const recentMemberLen = 28

// recentMember is id as the listing index holds it.
func recentMember(id string) string {
	if len(id) < recentMemberLen {
		return id
	}
	return id[:recentMemberLen]
}

// idSuffix is the last four digits of every task id of the queue numbered num.
func idSuffix(num uint16) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[num>>12], digits[num>>8&0xf], digits[num>>4&0xf], digits[num&0xf]})
}

// idSuffixes returns idSuffix of each queue number in vals (an HMGET of
// the queue registry); a queue not in the registry gets "".
func idSuffixes(vals []any) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			if n, err := strconv.ParseUint(s, 10, 16); err == nil {
				out[i] = idSuffix(uint16(n))
			}
		}
	}
	return out
}

// WithQueueNumber returns id with its queue number (its last four hex
// digits) replaced by num.
func WithQueueNumber(id string, num uint16) string {
	if len(id) != 32 {
		return id
	}
	return id[:28] + fmt.Sprintf("%04x", num)
}
