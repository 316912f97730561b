package rdb

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
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
	_, _ = rand.Read(b[8:14])
	b[0] = byte(ms >> 40)
	b[1] = byte(ms >> 32)
	b[2] = byte(ms >> 24)
	b[3] = byte(ms >> 16)
	b[4] = byte(ms >> 8)
	b[5] = byte(ms)
	b[6] = 0x70 | byte(seq>>8)
	b[7] = byte(seq)
	b[8] = 0x80 | (b[8] & 0x3f) // RFC 9562 variant
	binary.BigEndian.PutUint16(b[14:], queueNum)
	return hex.EncodeToString(b[:])
}

// ParseTaskID checks that id is a dtq task id and returns its queue number.
func ParseTaskID(id string) (queueNum uint16, ok bool) {
	if len(id) != 32 {
		return 0, false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return 0, false
		}
	}
	if id[12] != '7' {
		return 0, false
	}
	var b [16]byte
	_, _ = hex.Decode(b[:], []byte(id))
	return binary.BigEndian.Uint16(b[14:]), true
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
	return time.UnixMilli(int64(binary.BigEndian.Uint64(b[:])))
}
