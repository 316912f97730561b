package dtqtype

import (
	"encoding/json"
	"fmt"
)

// maxNesting is encoding/json's limit on nested arrays and objects: it
// refuses deeper raw JSON, so appendRaw does too.
const maxNesting = 10000

// rawStringPlain marks the bytes copied out of a raw JSON string as they
// are. Non-ASCII bytes are not checked for valid UTF-8, since encoding/json
// passes raw JSON's bytes through; 0xE2 may start U+2028 or U+2029, which
// are escaped.
var rawStringPlain = func() (plain [256]bool) {
	for c := 0x20; c < 256; c++ {
		switch c {
		case '"', '\\', '<', '>', '&', 0xE2:
		default:
			plain[c] = true
		}
	}
	return plain
}()

// rawError is a raw JSON field that does not hold valid JSON.
type rawError struct {
	field  string
	offset int
}

func (e *rawError) Error() string {
	return fmt.Sprintf("dtqtype: %s is not valid JSON (at byte %d)", e.field, e.offset)
}

// appendRaw appends raw as encoding/json writes a json.RawMessage: null when
// nil, otherwise validated, without whitespace outside strings, and with
// < > & U+2028 U+2029 in strings escaped. field names raw in the error.
func appendRaw(b []byte, raw json.RawMessage, field string) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	c := compactor{dst: b, src: raw}
	if !c.run() {
		return c.dst, &rawError{field: field, offset: c.i}
	}
	return c.dst, nil
}

// compactor validates and compacts one JSON text in a single pass, without
// recursion. Checked bytes are copied in runs, so already compact JSON is
// mostly one copy.
type compactor struct {
	dst   []byte
	src   []byte
	i     int // the next byte to check
	start int // src[start:i] is checked but not yet copied
}

// run compacts src onto dst and reports whether src was valid; if not, i
// is about where it went wrong.
func (c *compactor) run() bool {
	var (
		small [4]uint64
		open  = small[:] // bit d is set when the container at depth d is an object
		depth int
		n     = len(c.src)
	)
	for {
		// A value is due.
		c.space()
		if c.i == n {
			return false
		}
		complete := true
		switch ch := c.src[c.i]; ch {
		case '{', '[':
			if depth == maxNesting {
				return false
			}
			if depth == len(open)*64 {
				open = append(open, make([]uint64, len(open))...)
			}
			if ch == '{' {
				open[depth/64] |= 1 << (depth % 64)
			} else {
				open[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			c.i++
			c.space()
			end := byte('}')
			if ch == '[' {
				end = ']'
			}
			switch {
			case c.i < n && c.src[c.i] == end:
				c.i++
				depth--
			case ch == '{':
				if !c.key() {
					return false
				}
				complete = false
			default:
				complete = false
			}
		case '"':
			if !c.str() {
				return false
			}
		case 't':
			if !c.word("true") {
				return false
			}
		case 'f':
			if !c.word("false") {
				return false
			}
		case 'n':
			if !c.word("null") {
				return false
			}
		default:
			if !c.number() {
				return false
			}
		}
		if !complete {
			continue
		}

		// A value is complete: close containers until one takes another.
	closing:
		for {
			c.space()
			if depth == 0 {
				if c.i != n {
					return false
				}
				c.dst = append(c.dst, c.src[c.start:]...)
				return true
			}
			if c.i == n {
				return false
			}
			inObject := open[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			switch ch := c.src[c.i]; {
			case ch == ',':
				c.i++
				if inObject {
					c.space()
					if !c.key() {
						return false
					}
				}
				break closing
			case inObject && ch == '}', !inObject && ch == ']':
				c.i++
				depth--
			default:
				return false
			}
		}
	}
}

// space skips whitespace, leaving it out of dst.
func (c *compactor) space() {
	i := c.i
	for i < len(c.src) {
		switch c.src[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	if i > c.i {
		c.dst = append(c.dst, c.src[c.start:c.i]...)
		c.i, c.start = i, i
	}
}

// key checks an object key and its colon.
func (c *compactor) key() bool {
	if c.i == len(c.src) || c.src[c.i] != '"' || !c.str() {
		return false
	}
	c.space()
	if c.i == len(c.src) || c.src[c.i] != ':' {
		return false
	}
	c.i++
	return true
}

// str checks the string at i (a quote), escaping < > & U+2028 U+2029.
func (c *compactor) str() bool {
	src, i := c.src, c.i+1
	for i < len(src) {
		ch := src[i]
		if rawStringPlain[ch] {
			i++
			continue
		}
		switch ch {
		case '"':
			c.i = i + 1
			return true
		case '\\':
			i++
			if i == len(src) {
				c.i = i
				return false
			}
			switch src[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				for j := 1; j <= 4; j++ {
					if i+j == len(src) || !isHex(src[i+j]) {
						c.i = i + j
						return false
					}
				}
				i += 5
			default:
				c.i = i
				return false
			}
		case '<', '>', '&':
			c.dst = append(c.dst, src[c.start:i]...)
			c.dst = append(c.dst, '\\', 'u', '0', '0', hexDigits[ch>>4], hexDigits[ch&0xF])
			i++
			c.start = i
		case 0xE2:
			if i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8 {
				c.dst = append(c.dst, src[c.start:i]...)
				c.dst = append(c.dst, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
				i += 3
				c.start = i
			} else {
				i++
			}
		default: // a control byte
			c.i = i
			return false
		}
	}
	c.i = i
	return false
}

// word checks the literal at i.
func (c *compactor) word(w string) bool {
	if len(c.src)-c.i < len(w) || string(c.src[c.i:c.i+len(w)]) != w {
		return false
	}
	c.i += len(w)
	return true
}

// number checks -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at i.
func (c *compactor) number() bool {
	src, i := c.src, c.i
	n := len(src)
	if i < n && src[i] == '-' {
		i++
	}
	switch {
	case i < n && src[i] == '0':
		i++
	case i < n && '1' <= src[i] && src[i] <= '9':
		i = skipDigits(src, i+1)
	default:
		c.i = i
		return false
	}
	if i < n && src[i] == '.' {
		j := skipDigits(src, i+1)
		if j == i+1 {
			c.i = j
			return false
		}
		i = j
	}
	if i < n && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < n && (src[i] == '+' || src[i] == '-') {
			i++
		}
		j := skipDigits(src, i)
		if j == i {
			c.i = j
			return false
		}
		i = j
	}
	c.i = i
	return true
}

func skipDigits(src []byte, i int) int {
	for i < len(src) && '0' <= src[i] && src[i] <= '9' {
		i++
	}
	return i
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
