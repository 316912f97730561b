package dtq

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-io/dtq/internal/rdb"
)

// DedupMode says what a submission does when its dedup key already has a
// task (docs/deduplication.md has the whole table).
type DedupMode string

// The deduplication modes.
const (
	// DedupDrop: while the key's task is not terminal, a new submission
	// returns it and creates nothing.
	DedupDrop DedupMode = "drop"
	// DedupThrottle: at most one task per key per TTL, counted from the
	// first submission, even after that task ended.
	DedupThrottle DedupMode = "throttle"
	// DedupDebounce: the task waits Window before it may start; a new
	// submission within it replaces the waiting task's payload and
	// metadata and pushes its start to now + Window, never past the first
	// submission + MaxWait.
	DedupDebounce DedupMode = "debounce"
	// DedupReplace: a queued (not running) task of the key is cancelled
	// and the new one queued.
	DedupReplace DedupMode = "replace"
	// DedupKeepLast: at most one running and one queued task per key; a
	// new submission cancels the queued one, and waits while one runs.
	DedupKeepLast DedupMode = "keep_last"
)

// Dedup bounds.
const (
	// MaxDedupKey bounds a dedup key (and the key By makes).
	MaxDedupKey = 256
	// MaxDedupPaths bounds Dedup.By.
	MaxDedupPaths = 8
	// MaxDedupDuration bounds TTL, Window and MaxWait.
	MaxDedupDuration = 365 * 24 * time.Hour
	// defaultMaxWaitWindows: a debounce without MaxWait waits at most this
	// many windows after its first submission, so that a steady stream of
	// submissions cannot hold its task back for ever.
	defaultMaxWaitWindows = 10
)

// Dedup collapses submissions of the same work (docs/deduplication.md).
// Idempotency keys make a retried request safe; a dedup key makes
// different submissions of the same work one task, the way Mode says. The
// key is scoped to the queue; an idempotency key is checked first.
type Dedup struct {
	// Key is the dedup key, 1..256 printable ASCII characters, not
	// beginning with "by:" (the keys By makes). Or By.
	Key string
	// By makes the key from the submission instead: each entry is
	// "task_type" or a path into the payload, "payload.user_id" (dots
	// between object members; a number picks an array element). A path
	// the payload lacks counts as null. At most 8 entries. Values count
	// as their canonical JSON: members sorted, numbers by exact value
	// (1, 1.0 and 1e0 are one; big integers are never rounded).
	By []string
	// Mode is what a new submission of a key that has a task does. Required.
	Mode DedupMode
	// TTL: throttle's period (required there); for the other modes, how
	// long the key is held at most (0 = until its task ends).
	TTL time.Duration
	// Window: debounce's quiet time before the task may start (required
	// there, debounce only).
	Window time.Duration
	// MaxWait: debounce's bound on how long after the first submission the
	// task may be pushed back (debounce only; 0 = 10 windows).
	MaxWait time.Duration
}

// DedupModes lists the modes, in the order docs/deduplication.md has them.
var DedupModes = []DedupMode{DedupDrop, DedupThrottle, DedupDebounce, DedupReplace, DedupKeepLast}

// normalizeDedup checks d (not nil) and makes the ingest script's spec of
// it for a task of type typ with compact JSON payload.
func normalizeDedup(d *Dedup, typ string, payload []byte) (*rdb.DedupSpec, error) {
	if !slices.Contains(DedupModes, d.Mode) {
		return nil, invalid("dedup.mode", "must be one of drop, throttle, debounce, replace, keep_last")
	}
	spec := &rdb.DedupSpec{Mode: string(d.Mode)}
	switch {
	case d.Key != "" && len(d.By) > 0:
		return nil, invalid("dedup", "takes key or by, not both")
	case d.Key != "":
		if err := checkDedupKey("dedup.key", d.Key); err != nil {
			return nil, err
		}
		if strings.HasPrefix(d.Key, dedupByPrefix) {
			// The keys by makes: a literal key there could collapse into
			// (or be collapsed by) submissions it has nothing to do with.
			return nil, invalid("dedup.key", "may not begin with %q: that prefix is kept for the keys dedup.by makes; "+
				"choose another key, or send by", dedupByPrefix)
		}
		spec.Key = d.Key
	case len(d.By) > 0:
		key, err := dedupKeyBy(d.By, typ, payload)
		if err != nil {
			return nil, err
		}
		spec.Key = key
	default:
		return nil, invalid("dedup", "needs key (1..256 printable characters) or by (paths such as \"payload.user_id\" and \"task_type\")")
	}
	durations := []struct {
		field string
		d     time.Duration
		to    *int64
	}{{"dedup.ttl", d.TTL, &spec.TTL}, {"dedup.window", d.Window, &spec.Window}, {"dedup.max_wait", d.MaxWait, &spec.MaxWait}}
	for _, x := range durations {
		if x.d == 0 {
			continue
		}
		if x.d < time.Millisecond || x.d > MaxDedupDuration || x.d%time.Millisecond != 0 {
			return nil, invalid(x.field, "must be a duration of whole milliseconds between 1ms and 8760h (365 days), like \"5s\" or \"10m\"")
		}
		*x.to = x.d.Milliseconds()
	}
	switch {
	case d.Mode == DedupThrottle && spec.TTL == 0:
		return nil, invalid("dedup.ttl", "is required for throttle: the period in which one task per key runs, like \"1m\"")
	case d.Mode == DedupDebounce && spec.Window == 0:
		return nil, invalid("dedup.window", "is required for debounce: how long the task waits for more submissions, like \"5s\"")
	case d.Mode != DedupDebounce && spec.Window != 0:
		return nil, invalid("dedup.window", "applies to debounce only")
	case d.Mode != DedupDebounce && spec.MaxWait != 0:
		return nil, invalid("dedup.max_wait", "applies to debounce only")
	case spec.MaxWait != 0 && spec.MaxWait < spec.Window:
		return nil, invalid("dedup.max_wait", "must be at least the window")
	}
	if d.Mode == DedupDebounce && spec.MaxWait == 0 {
		spec.MaxWait = min(spec.Window*defaultMaxWaitWindows, MaxDedupDuration.Milliseconds())
	}
	return spec, nil
}

// checkDedupKey checks a dedup key: 1..256 printable ASCII characters.
func checkDedupKey(field, key string) error {
	if len(key) > MaxDedupKey {
		return invalid(field, "is %d characters; the limit is %d", len(key), MaxDedupKey)
	}
	for i := range len(key) {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return invalid(field, "must be printable ASCII (0x20..0x7e)")
		}
	}
	return nil
}

// dedupByPrefix begins every key dedup.by makes, and no literal key.
const dedupByPrefix = "by:"

// dedupKeyBy makes the dedup key of paths: "by:" and each path with its
// value's compact JSON ("task_type=\"email\"&payload.user_id=42"), its
// object members sorted and its numbers in canonical form
// (canonicalNumber), or, when that is longer than a key may be or not
// printable ASCII, "by:" and the hex SHA-256 of it.
func dedupKeyBy(paths []string, typ string, payload []byte) (string, error) {
	if len(paths) > MaxDedupPaths {
		return "", invalid("dedup.by", "has %d paths; the limit is %d", len(paths), MaxDedupPaths)
	}
	var doc any
	decoded := false
	var b strings.Builder
	b.WriteString(dedupByPrefix)
	for i, p := range paths {
		if i > 0 {
			b.WriteByte('&')
		}
		if p == "task_type" {
			b.WriteString("task_type=")
			b.Write(strconv.AppendQuote(nil, typ)) // a task type is [A-Za-z0-9_.:-]: its JSON string
			continue
		}
		rest, ok := strings.CutPrefix(p, "payload.")
		if !ok || len(p) > MaxDedupKey || rest == "" || strings.HasPrefix(rest, ".") || strings.HasSuffix(rest, ".") || strings.Contains(rest, "..") {
			return "", invalid("dedup.by", "entry %q must be \"task_type\" or a payload path like \"payload.user_id\" (at most %d characters)", p, MaxDedupKey)
		}
		if !decoded {
			dec := json.NewDecoder(bytes.NewReader(payload))
			dec.UseNumber() // numbers exact (big ones too), then canonical: 42 and 42.0 are one
			if err := dec.Decode(&doc); err != nil {
				return "", invalid("payload", "is not valid JSON: %v", err)
			}
			decoded = true
		}
		v, err := json.Marshal(canonicalNumbers(lookupPath(doc, strings.Split(rest, ".")))) // sorted members: one text per value
		if err != nil {
			return "", invalid("payload", "cannot be read at %q: %v", p, err)
		}
		b.WriteString(p)
		b.WriteByte('=')
		b.Write(v)
	}
	key := b.String()
	if checkDedupKey("", key) != nil {
		sum := sha256.Sum256([]byte(key))
		key = dedupByPrefix + hex.EncodeToString(sum[:])
	}
	return key, nil
}

// lookupPath is the value at path in doc (a decoded JSON value), nil when
// there is none.
func lookupPath(doc any, path []string) any {
	for _, seg := range path {
		switch v := doc.(type) {
		case map[string]any:
			doc = v[seg]
		case []any:
			i, ok := arrayIndex(seg)
			if !ok || i >= len(v) {
				return nil
			}
			doc = v[i]
		default:
			return nil
		}
	}
	return doc
}

// arrayIndex reads an array index path segment: decimal digits only.
func arrayIndex(seg string) (int, bool) {
	if seg == "" || len(seg) > 9 {
		return 0, false
	}
	n := 0
	for i := range len(seg) {
		c := seg[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// canonicalNumbers puts every number in v (a JSON value decoded with
// UseNumber) in canonical form, in place, and returns v.
func canonicalNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		return json.Number(canonicalNumber(string(x)))
	case map[string]any:
		for k, e := range x {
			x[k] = canonicalNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonicalNumbers(e)
		}
	}
	return v
}

// canonicalNumber is the one text of a JSON number's exact decimal value
// (s must be in JSON's number grammar): 1, 1.0, 1e0, 10E-1 and 0.1e1 are
// all "1", and -0 is "0". It is written as ECMAScript writes a number
// (plain digits up to 21 before the point, "0.000001" down to 6 zeros
// after it, else "1.5e+21", "1e-7"), but with every digit kept: nothing is
// rounded to a 64-bit float, so 9007199254740993 and 9007199254740992
// stay apart, and an exponent of any size is kept exactly.
func canonicalNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, "0"
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
	}
	whole, frac, _ := strings.Cut(mant, ".")
	d := strings.TrimLeft(whole+frac, "0")
	if d == "" {
		return "0"
	}
	trimmed := strings.TrimRight(d, "0")
	// The value is 0.d × 10^n, d without leading or trailing zeros.
	n, ok := new(big.Int).SetString(strings.TrimPrefix(exp, "+"), 10)
	if !ok {
		return s // not reached: the decoder checked the grammar
	}
	n.Add(n, big.NewInt(int64(len(whole)-(len(whole)+len(frac)-len(d)))))
	d = trimmed
	k := len(d)
	var out string
	switch {
	case n.IsInt64() && n.Int64() >= int64(k) && n.Int64() <= 21:
		out = d + strings.Repeat("0", int(n.Int64())-k)
	case n.IsInt64() && n.Int64() > 0 && n.Int64() <= 21:
		out = d[:n.Int64()] + "." + d[n.Int64():]
	case n.IsInt64() && n.Int64() > -6 && n.Int64() <= 0:
		out = "0." + strings.Repeat("0", int(-n.Int64())) + d
	default:
		out = d[:1]
		if k > 1 {
			out += "." + d[1:]
		}
		e := n.Sub(n, big.NewInt(1))
		if e.Sign() >= 0 {
			out += "e+" + e.String()
		} else {
			out += "e" + e.String()
		}
	}
	if neg {
		out = "-" + out
	}
	return out
}
