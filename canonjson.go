package dtq

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The idempotency fingerprint hashes one canonical JSON text of the fields
// that define the work: the object encoding/json writes for them, with the
// payload decoded (numbers kept as written) and encoded again, so that key
// order and spacing do not count. Decoding into maps and encoding them
// again was a third of a keyed Submit's client CPU; a payload that is
// already in that form (what json.Marshal writes for maps and sorted
// structs of plain text, numbers and literals) is used as it is.

// canonicalWork returns the JSON text the fingerprint hashes. Both ways
// give the same bytes; FuzzCanonicalWork compares them.
func (n *normalized) canonicalWork() []byte {
	if plainJSONString(n.typ) && isCanonicalJSON(n.payload) {
		return n.appendWork(make([]byte, 0, len(n.payload)+160), n.payload)
	}
	return n.reencodedWork()
}

// reencodedWork is canonicalWork by decoding the payload and encoding the
// whole object with encoding/json (maps marshal with sorted keys).
func (n *normalized) reencodedWork() []byte {
	d := json.NewDecoder(bytes.NewReader(n.payload))
	d.UseNumber()
	var payload any
	_ = d.Decode(&payload) // valid JSON: checked by objectJSON
	canon := map[string]any{
		"task_type":    n.typ,
		"payload":      payload,
		"priority":     n.priority,
		"max_attempts": n.maxAttempts,
		"timeout_ms":   n.timeoutMS,
	}
	if n.runAt != 0 {
		canon["run_at"] = n.runAt
	} else {
		canon["delay_ms"] = n.delayMS
	}
	if n.expiresGiven {
		canon["expires_at"] = n.expiresAt
	} else if n.ttlSeconds != 0 {
		canon["ttl_seconds"] = n.ttlSeconds
	}
	b, _ := json.Marshal(canon)
	return b
}

// appendWork writes the object reencodedWork encodes, keys in the same
// (sorted) order, with payload, canonical already, as it is. The task
// type must be a plain string.
func (n *normalized) appendWork(b, payload []byte) []byte {
	num := func(b []byte, key string, v int64) []byte {
		b = append(b, key...)
		return strconv.AppendInt(b, v, 10)
	}
	b = append(b, '{')
	if n.runAt == 0 {
		b = num(b, `"delay_ms":`, n.delayMS)
		b = append(b, ',')
	}
	if n.expiresGiven {
		b = num(b, `"expires_at":`, n.expiresAt)
		b = append(b, ',')
	}
	b = num(b, `"max_attempts":`, int64(n.maxAttempts))
	b = append(b, `,"payload":`...)
	b = append(b, payload...)
	b = num(b, `,"priority":`, int64(n.priority))
	if n.runAt != 0 {
		b = num(b, `,"run_at":`, n.runAt)
	}
	b = append(b, `,"task_type":"`...)
	b = append(b, n.typ...)
	b = num(b, `","timeout_ms":`, n.timeoutMS)
	if !n.expiresGiven && n.ttlSeconds != 0 {
		b = num(b, `,"ttl_seconds":`, n.ttlSeconds)
	}
	return append(b, '}')
}

// plainJSONString reports whether s encodes as JSON between quotes as it
// is: printable ASCII other than the quote, the backslash and the three
// characters encoding/json escapes for HTML (<, >, &).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) {
			return false
		}
	}
	return true
}

func plainByte(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// isCanonicalJSON reports whether b is one JSON value written exactly as
// encoding/json writes what it decodes from b (numbers as json.Number): no
// space outside strings, object keys in strictly increasing byte order
// (so no key twice), strings of plain characters only (see
// plainJSONString), numbers in JSON's grammar (kept as written), at most
// MaxJSONDepth levels. It may answer false for a canonical text, never
// true for another.
func isCanonicalJSON(b []byte) bool {
	s := canonScanner{b: b}
	return s.value(0) && s.i == len(b)
}

// canonScanner walks a JSON text for isCanonicalJSON; i is the next byte.
type canonScanner struct {
	b []byte
	i int
}

func (s *canonScanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '{':
		return depth < MaxJSONDepth && s.object(depth+1)
	case '[':
		return depth < MaxJSONDepth && s.array(depth+1)
	case '"':
		_, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		return s.number()
	}
}

func (s *canonScanner) literal(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

// str reads a string of plain characters and returns its content.
func (s *canonScanner) str() ([]byte, bool) {
	start := s.i + 1 // after the opening quote
	for j := start; j < len(s.b); j++ {
		if s.b[j] == '"' {
			s.i = j + 1
			return s.b[start:j], true
		}
		if !plainByte(s.b[j]) {
			return nil, false
		}
	}
	return nil, false
}

func (s *canonScanner) object(depth int) bool {
	s.i++ // '{'
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	var prev []byte
	for first := true; ; first = false {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		k, ok := s.str()
		if !ok || (!first && bytes.Compare(prev, k) >= 0) {
			return false
		}
		prev = k
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		if !s.value(depth) || s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

func (s *canonScanner) array(depth int) bool {
	s.i++ // '['
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		if !s.value(depth) || s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return true
		default:
			return false
		}
	}
}

// number reads a number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *canonScanner) number() bool {
	b, i := s.b, s.i
	digits := func() bool {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i < len(b) && b[i] == '0' {
		i++
	} else if i >= len(b) || b[i] < '1' || b[i] > '9' || !digits() {
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	s.i = i
	return true
}
