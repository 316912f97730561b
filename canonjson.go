package dtq

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// The idempotency fingerprint hashes one canonical JSON text of the fields
// that define the work: the object encoding/json writes for them, with the
// payload decoded (numbers kept as written) and encoded again, so that key
// order and spacing do not count. Decoding into maps and encoding them
// again was a third of a keyed Submit's client CPU; appendCanonicalJSON
// writes the same text straight from the payload's bytes (keys sorted,
// values copied) for every payload whose strings need no escaping, which
// is nearly all of them.

// canonicalWork returns the JSON text the fingerprint hashes. Both ways
// give the same bytes; FuzzCanonicalWork compares them.
func (n *normalized) canonicalWork() []byte {
	if plainJSONString(n.typ) {
		if b, ok := n.appendWork(make([]byte, 0, len(n.payload)+160)); ok {
			return b
		}
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
	return mustJSON(canon)
}

// appendWork writes the object reencodedWork encodes, keys in the same
// (sorted) order, the payload put in canonical form in place (see
// appendCanonicalJSON, whose false it answers). The task type must be a
// plain string.
func (n *normalized) appendWork(b []byte) ([]byte, bool) {
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
	b, ok := appendCanonicalJSON(b, n.payload)
	if !ok {
		return nil, false
	}
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
	return append(b, '}'), true
}

// plainJSONString reports whether s encodes as JSON between quotes as it
// is: printable ASCII other than the quote, the backslash and the three
// characters encoding/json escapes for HTML (<, >, &).
func plainJSONString(s string) bool {
	for i := range len(s) {
		if !plainByte(s[i]) {
			return false
		}
	}
	return true
}

func plainByte(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// appendCanonicalJSON appends to dst the text encoding/json writes for the
// JSON value b (decoded with numbers as json.Number): no spaces, each
// object's keys in sorted order, numbers and literals as written. It
// answers false for a text it leaves to encoding/json: a string with an
// escape or a character outside plainJSONString's, a key twice (the last
// would win), space between tokens, nesting deeper than MaxJSONDepth, or
// anything not JSON.
func appendCanonicalJSON(dst, b []byte) ([]byte, bool) {
	c := canonWriter{in: b, out: dst}
	if !c.value(0) || c.i != len(b) {
		return dst, false
	}
	return c.out, true
}

// canonWriter copies a JSON text from in to out, sorting object keys; i is
// the next byte of in.
type canonWriter struct {
	in, out []byte
	i       int
}

func (c *canonWriter) value(depth int) bool {
	if c.i >= len(c.in) {
		return false
	}
	switch c.in[c.i] {
	case '{':
		return depth < MaxJSONDepth && c.object(depth+1)
	case '[':
		return depth < MaxJSONDepth && c.array(depth+1)
	case '"':
		_, _, ok := c.str()
		return ok
	case 't':
		return c.literal("true")
	case 'f':
		return c.literal("false")
	case 'n':
		return c.literal("null")
	default:
		return c.number()
	}
}

func (c *canonWriter) literal(w string) bool {
	if len(c.in)-c.i < len(w) || string(c.in[c.i:c.i+len(w)]) != w {
		return false
	}
	c.out = append(c.out, w...)
	c.i += len(w)
	return true
}

// str copies a string of plain characters; it returns where its content
// starts and ends in in.
func (c *canonWriter) str() (int, int, bool) {
	start := c.i + 1 // after the opening quote
	for j := start; j < len(c.in); j++ {
		if c.in[j] == '"' {
			c.out = append(c.out, c.in[c.i:j+1]...)
			c.i = j + 1
			return start, j, true
		}
		if !plainByte(c.in[j]) {
			return 0, 0, false
		}
	}
	return 0, 0, false
}

// member is one written "key":value of an object: its key's place in in,
// its place in out.
type member struct{ keyStart, keyEnd, from, to int }

func (c *canonWriter) object(depth int) bool {
	start := len(c.out) + 1 // after the '{'
	var buf [16]member
	members, sorted := buf[:0], true
	ok := c.items('}', func() bool {
		if c.i >= len(c.in) || c.in[c.i] != '"' {
			return false
		}
		m := member{from: len(c.out)}
		var ok bool
		if m.keyStart, m.keyEnd, ok = c.str(); !ok || c.i >= len(c.in) || c.in[c.i] != ':' {
			return false
		}
		c.i++
		c.out = append(c.out, ':')
		if !c.value(depth) {
			return false
		}
		m.to = len(c.out)
		if n := len(members); n > 0 && bytes.Compare(c.key(members[n-1]), c.key(m)) >= 0 {
			sorted = false
		}
		members = append(members, m)
		return true
	})
	if !ok || sorted {
		return ok
	}
	c.out = c.out[:len(c.out)-1] // the '}' goes after the sorted members
	if !c.sortMembers(start, members) {
		return false
	}
	c.out = append(c.out, '}')
	return true
}

func (c *canonWriter) key(m member) []byte { return c.in[m.keyStart:m.keyEnd] }

// sortMembers rewrites out[start:] (the members written, comma-separated)
// in key order; it answers false when a key comes twice. The sorted text is
// written after the members and moved over them: no copy of its own.
func (c *canonWriter) sortMembers(start int, members []member) bool {
	slices.SortFunc(members, func(a, b member) int { return bytes.Compare(c.key(a), c.key(b)) })
	for i := 1; i < len(members); i++ {
		if bytes.Equal(c.key(members[i-1]), c.key(members[i])) {
			return false
		}
	}
	end := len(c.out)
	for i, m := range members {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, c.out[m.from:m.to]...)
	}
	c.out = c.out[:start+copy(c.out[start:], c.out[end:])]
	return true
}

func (c *canonWriter) array(depth int) bool {
	return c.items(']', func() bool { return c.value(depth) })
}

// items copies an object or an array: its opening byte, the items item
// copies, comma-separated, and its closing byte.
func (c *canonWriter) items(closing byte, item func() bool) bool {
	c.out = append(c.out, c.in[c.i])
	c.i++
	if c.i < len(c.in) && c.in[c.i] == closing {
		c.i++
		c.out = append(c.out, closing)
		return true
	}
	for {
		if !item() || c.i >= len(c.in) {
			return false
		}
		switch c.in[c.i] {
		case ',':
			c.i++
			c.out = append(c.out, ',')
		case closing:
			c.i++
			c.out = append(c.out, closing)
			return true
		default:
			return false
		}
	}
}

// number copies a number in JSON's grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?,
// as written (encoding/json writes a json.Number as it is).
func (c *canonWriter) number() bool {
	b, i := c.in, c.i
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
	c.out = append(c.out, b[c.i:i]...)
	c.i = i
	return true
}
