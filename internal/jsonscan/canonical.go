// Package jsonscan reads JSON text as bytes, without decoding it: how deep
// it nests, where it holds a lone UTF-16 surrogate escape, and its
// canonical form (the text encoding/json would write for it, keys sorted).
// Submission validation and the idempotency fingerprint run these on every
// submission, so they are loops over the bytes rather than a decode.
package jsonscan

import (
	"bytes"
	"slices"
)

// PlainString reports whether s encodes as JSON between quotes as it is:
// printable ASCII other than the quote, the backslash and the three
// characters encoding/json escapes for HTML (<, >, &).
func PlainString(s string) bool {
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

// AppendCanonical appends to dst the text encoding/json writes for the JSON
// value b (decoded with numbers as json.Number): no spaces, each object's
// keys in sorted order, numbers and literals as written. It answers false
// for a text it leaves to encoding/json: a string with an escape or a
// character outside PlainString's, a key twice (the last would win), space
// between tokens, nesting deeper than maxDepth, or anything not JSON.
func AppendCanonical(dst, b []byte, maxDepth int) ([]byte, bool) {
	c := canonWriter{in: b, out: dst, maxDepth: maxDepth}
	if !c.value(0) || c.i != len(b) {
		return dst, false
	}
	return c.out, true
}

// canonWriter copies a JSON text from in to out, sorting object keys; i is
// the next byte of in.
type canonWriter struct {
	in, out  []byte
	i        int
	maxDepth int
}

func (c *canonWriter) value(depth int) bool {
	if c.i >= len(c.in) {
		return false
	}
	switch c.in[c.i] {
	case '{':
		return depth < c.maxDepth && c.object(depth+1)
	case '[':
		return depth < c.maxDepth && c.array(depth+1)
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
