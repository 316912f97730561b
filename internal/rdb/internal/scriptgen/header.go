package main

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A script's header is its leading comment block. The lines this tool reads
// in it name every KEYS and ARGV entry, one a line, in index order:
//
//	-- KEYS[1] lease: lease ZSET of running tasks       Lease string
//	-- KEYS[2..11] bands: band streams p0..p9           Bands []string, 10 checked
//	-- ARGV[1] now int64: now (ms)                      Now int64 (string when left out)
//	-- ARGV[6..] ids []string: task ids                 an open tail of values
//	-- ARGV[6..] leases []{id, attempt int}: pairs      an open tail of items
//	-- ARGV[6..] nodes packed []{ref, def bytes}: …      a tail sent as ARGV[6]
//	--   alone (packer; the script reads it with packed_argv), however
//	--   long: no call sends more than 3,999 arguments
//	-- KEYS[6 + 2*n] outbox: an entry after a tail of items of 2
//	-- KEYS[7] fair_on?: optional: sent while set, and only after the
//	--   optional entries before it (single strings only)
//	-- Returns: {state string, held? int, ids ...string}
//
// ARGV types are string, int, int64, float64, bytes and any; KEYS entries
// are strings. An entry's prose may go on over the lines after it, up to a
// blank comment line. The Returns: line holds the reply's shape alone (see
// parseReply); its prose follows on the next lines.

// side is one of KEYS and ARGV as a header describes it.
type side struct {
	entries []*entry
	fixed   int // the entries before an open tail
	stride  int // per item of the tail (0: no tail)
	after   int // entries after the tail
}

// entry kinds.
const (
	one   = iota // KEYS[n]
	span         // KEYS[a..b]: a slice of b-a+1
	tail         // KEYS[a..]: a slice of values or of items
	after        // KEYS[b + s*n]: one entry after a tail
)

// entry is one named KEYS or ARGV entry.
type entry struct {
	kind     int
	name     string // snake_case, as in the header
	typ      string // Go type: of the entry, or of the slice's elements
	count    int    // a span's length
	items    []field
	optional bool
	packed   bool // a tail of values or items sent as one argument
	doc      string
}

// field is one field of a tail's items, or of a reply's tuple.
type field struct {
	name     string
	typ      string // Go type
	optional bool   // a reply field that may be left out (it and all after it)
	rest     bool   // a reply field that takes the remaining elements
}

// reply is the shape of a script's reply.
type reply struct {
	typ    string  // Go type of a scalar or list reply; "" for a tuple
	fields []field // a tuple's fields
}

// header is what a script's header says.
type header struct {
	script     string
	keys, args side
	reply      reply
}

var (
	entryLine  = regexp.MustCompile(`^(KEYS|ARGV)\[([^\]]+)\]\s+([a-z][a-z0-9_]*)(\?)?(?:\s+([^:]+?))?\s*:\s*(.*)$`)
	idxOne     = regexp.MustCompile(`^(\d+)$`)
	idxSpan    = regexp.MustCompile(`^(\d+)\.\.(\d+)$`)
	idxTail    = regexp.MustCompile(`^(\d+)\.\.$`)
	idxAfter   = regexp.MustCompile(`^(\d+) \+ (\d+)\*n$`)
	returnLine = regexp.MustCompile(`^Returns:\s*(.+)$`)
	fieldName  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// parseHeader reads the header of the script named script from its source.
func parseHeader(script, src string) (*header, error) {
	var lines []string
	for l := range strings.SplitSeq(src, "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "--") {
			break
		}
		if strings.HasPrefix(t, "--!") {
			continue
		}
		lines = append(lines, strings.TrimSpace(strings.TrimPrefix(t, "--")))
	}
	if !slices.ContainsFunc(lines, returnLine.MatchString) {
		return nil, errors.New("no Returns: line: the header does not follow the grammar")
	}
	h := &header{script: script}
	var last *entry
	returns := false
	for _, l := range lines {
		if m := returnLine.FindStringSubmatch(l); m != nil {
			if returns {
				return nil, errors.New("two Returns: lines")
			}
			r, err := parseReply(strings.TrimSpace(m[1]))
			if err != nil {
				return nil, fmt.Errorf("the Returns: line: %w", err)
			}
			h.reply, returns, last = r, true, nil
			continue
		}
		m := entryLine.FindStringSubmatch(l)
		if m == nil {
			if strings.HasPrefix(l, "KEYS[") || strings.HasPrefix(l, "ARGV[") {
				return nil, fmt.Errorf("cannot read %q: want KEYS[i] name [type]: prose", l)
			}
			if last != nil && l != "" {
				last.doc += " " + l
			} else {
				last = nil
			}
			continue
		}
		s := &h.keys
		if m[1] == "ARGV" {
			s = &h.args
		}
		e, err := s.add(m[1], m[2], m[3], m[4] == "?", m[5], m[6])
		if err != nil {
			return nil, fmt.Errorf("%s[%s] %s: %w", m[1], m[2], m[3], err)
		}
		last = e
	}
	for _, e := range h.keys.entries {
		if slices.ContainsFunc(h.args.entries, func(a *entry) bool { return a.name == e.name && len(a.items) > 0 && len(e.items) > 0 }) {
			return nil, fmt.Errorf("%s names items in both KEYS and ARGV: their types would clash", e.name)
		}
	}
	return h, nil
}

// add reads one entry and checks that its index follows the ones before.
func (s *side) add(which, idx, name string, optional bool, typ, doc string) (*entry, error) {
	for _, e := range s.entries {
		if e.name == name {
			return nil, errors.New("named twice")
		}
	}
	e := &entry{name: name, optional: optional, doc: doc}
	next := s.fixed + 1
	switch {
	case idxOne.MatchString(idx):
		n, _ := strconv.Atoi(idx)
		if s.stride > 0 || n != next {
			return nil, fmt.Errorf("want %s", s.nextIndex())
		}
		e.kind = one
		s.fixed++
	case idxSpan.MatchString(idx):
		m := idxSpan.FindStringSubmatch(idx)
		from, _ := strconv.Atoi(m[1])
		to, _ := strconv.Atoi(m[2])
		if s.stride > 0 || from != next || to < from {
			return nil, fmt.Errorf("want a span from %s", s.nextIndex())
		}
		e.kind, e.count = span, to-from+1
		s.fixed = to
	case idxTail.MatchString(idx):
		from, _ := strconv.Atoi(idxTail.FindStringSubmatch(idx)[1])
		if s.stride > 0 || from != next {
			return nil, fmt.Errorf("want a tail from %s", s.nextIndex())
		}
		e.kind = tail
	case idxAfter.MatchString(idx):
		if n := len(s.entries); n > 0 && s.entries[n-1].packed {
			return nil, errors.New("nothing follows a packed tail (it is one argument)")
		}
		m := idxAfter.FindStringSubmatch(idx)
		base, _ := strconv.Atoi(m[1])
		stride, _ := strconv.Atoi(m[2])
		if s.stride == 0 || stride != s.stride || base != s.fixed+1+s.after {
			return nil, fmt.Errorf("want %s", s.nextIndex())
		}
		e.kind = after
		s.after++
	default:
		return nil, errors.New("cannot read the index")
	}
	if rest, ok := strings.CutPrefix(typ, "packed "); ok {
		if which != "ARGV" || e.kind != tail {
			return nil, errors.New("only an ARGV tail may be packed")
		}
		e.packed, typ = true, rest
	}
	if err := e.setType(which, typ); err != nil {
		return nil, err
	}
	if e.packed && (e.typ == "any" || slices.ContainsFunc(e.items, func(f field) bool { return f.typ == "any" })) {
		return nil, errors.New("a packed tail holds strings, numbers and bytes, not any")
	}
	if e.kind == tail {
		s.stride = max(len(e.items), 1)
	}
	if n := len(s.entries); n > 0 && s.entries[n-1].optional && !optional {
		return nil, errors.New("a required entry after an optional one")
	}
	if optional && (e.typ != "string" || (e.kind != one && e.kind != after)) {
		return nil, errors.New("only single string entries may be optional")
	}
	s.entries = append(s.entries, e)
	return e, nil
}

// nextIndex is the index the next entry of s must have.
func (s *side) nextIndex() string {
	if s.stride > 0 {
		return fmt.Sprintf("[%d + %d*n]", s.fixed+1+s.after, s.stride)
	}
	return fmt.Sprintf("[%d]", s.fixed+1)
}

// argTypes are the Go types an ARGV entry may have, by header name.
var argTypes = map[string]string{
	"string": "string", "int": "int", "int64": "int64", "float64": "float64", "bytes": "[]byte", "any": "any",
}

func (e *entry) setType(which, typ string) error {
	keyItems := e.kind == tail && strings.HasPrefix(typ, "[]{")
	if which == "KEYS" && typ != "" && !keyItems {
		return errors.New("KEYS entries are strings: no type")
	}
	if typ == "" {
		typ = "string"
		if e.kind == span || e.kind == tail {
			typ = "[]string"
		}
	}
	if e.kind != span && e.kind != tail {
		t, ok := argTypes[typ]
		if !ok {
			return fmt.Errorf("unknown type %q", typ)
		}
		e.typ = t
		return nil
	}
	elem, ok := strings.CutPrefix(typ, "[]")
	if !ok {
		return fmt.Errorf("a span or tail is a slice: want []T, got %q", typ)
	}
	if inner, ok := strings.CutPrefix(elem, "{"); ok && e.kind == tail {
		inner, ok = strings.CutSuffix(inner, "}")
		if !ok {
			return fmt.Errorf("unclosed item %q", typ)
		}
		for f := range strings.SplitSeq(inner, ",") {
			name, ft, _ := strings.Cut(strings.TrimSpace(f), " ")
			if ft == "" {
				ft = "string"
			}
			t, ok := argTypes[ft]
			if which == "KEYS" && t != "string" {
				ok = false
			}
			if !ok || !fieldName.MatchString(name) {
				return fmt.Errorf("cannot read the item field %q", f)
			}
			e.items = append(e.items, field{name: name, typ: t})
		}
		if len(e.items) < 2 {
			return errors.New("an item has two fields or more (else use []T)")
		}
		return nil
	}
	t, ok := argTypes[elem]
	if !ok {
		return fmt.Errorf("unknown type %q", typ)
	}
	e.typ = t
	return nil
}

// replyTypes are the Go types of a reply or of a tuple's field.
var replyTypes = map[string]string{"int": "int64", "string": "string", "[]int": "[]int64", "[]string": "[]string"}

// parseReply reads a reply shape: int, string, []int, []string, any (a
// reply whose shape depends on the call, handed over as go-redis reads it
// for a decoder written beside its caller), or a tuple
// {name type, name? type, ..., name ...type} of int, string, []int and
// []string fields, where name? fields may be left out (with the ones after
// them) and a last name ...type field takes the remaining elements.
func parseReply(s string) (reply, error) {
	if t, ok := replyTypes[s]; ok {
		return reply{typ: t}, nil
	}
	if s == "any" {
		return reply{typ: "any"}, nil
	}
	inner, ok := strings.CutPrefix(s, "{")
	if ok {
		inner, ok = strings.CutSuffix(inner, "}")
	}
	if !ok {
		return reply{}, fmt.Errorf("cannot read %q", s)
	}
	var r reply
	for f := range strings.SplitSeq(inner, ",") {
		name, t, _ := strings.Cut(strings.TrimSpace(f), " ")
		fd := field{}
		fd.name, fd.optional = strings.CutSuffix(name, "?")
		var rest bool
		if t, rest = strings.CutPrefix(t, "..."); rest {
			fd.rest = true
			t = "[]" + t
		}
		gt, ok := replyTypes[t]
		if !ok || !fieldName.MatchString(fd.name) {
			return reply{}, fmt.Errorf("cannot read the field %q", f)
		}
		fd.typ = gt
		if n := len(r.fields); n > 0 {
			p := r.fields[n-1]
			if p.rest {
				return reply{}, errors.New("a field after the ...rest one")
			}
			if p.optional && !fd.optional && !fd.rest {
				return reply{}, errors.New("a required field after an optional one")
			}
		}
		if fd.rest && fd.optional {
			return reply{}, errors.New("a rest field is never optional (it may be empty)")
		}
		r.fields = append(r.fields, fd)
	}
	return r, nil
}
