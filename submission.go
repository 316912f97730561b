package dtq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/dtq-io/dtq/internal/idemkey"
	"github.com/dtq-io/dtq/internal/jsonscan"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Submission describes a task to submit. Zero values select the defaults.
type Submission struct {
	// Queue is the queue name, ^[a-z0-9][a-z0-9_-]{0,63}$. Default "default".
	Queue string
	// Type is the task type, 1..128 characters of [A-Za-z0-9_.:-]. Required.
	Type string
	// Payload is a JSON object: a json.RawMessage or []byte holding one, or
	// any value that marshals to one (a struct or a map). nil means {}.
	Payload any
	// Priority is 0..9, 9 highest (new(7) sets 7). nil means 5.
	Priority *int
	// MaxAttempts is 1..the configured cap. 0 means min(5, cap).
	MaxAttempts int
	// Timeout bounds one attempt, 1ms..1h. 0 means the configured default.
	Timeout time.Duration
	// Delay postpones the task, 0..365 days. Ignored when RunAt is set.
	Delay time.Duration
	// RunAt is the earliest start time. Zero means now + Delay.
	RunAt time.Time
	// ExpiresAt is the deadline to start; a task not started by then expires.
	ExpiresAt time.Time
	// TTL is an expiry relative to creation, used when ExpiresAt is zero.
	TTL time.Duration
	// Metadata is a JSON object of at most 4 KiB, shown but never executed.
	// metadata.ttl_seconds is an expiry used when ExpiresAt and TTL are unset.
	Metadata any
	// IdempotencyKey maps duplicate submissions to one task: 1..255 printable
	// ASCII characters, scoped to the queue. An RFC 8941 quoted string is
	// unquoted.
	IdempotencyKey string
	// ConcurrencyKey groups tasks for the queue's key_concurrency limit
	// (running tasks at once per key, across all workers): 1..128 printable
	// ASCII characters. "" means none: only the queue-wide limits apply.
	ConcurrencyKey string
	// Retention is how long the task is kept once it has finished, 1s..366
	// days in whole seconds, or NoRetention to delete it as it finishes. It
	// overrides the workers' SucceededRetention and FailedRetention for
	// this task; a task with an idempotency key is still kept as long as
	// its record. 0 means the workers' setting. Not part of the
	// idempotency fingerprint.
	Retention time.Duration
	// KeepPayload keeps the payload of the task once it has succeeded; by
	// default a succeeded task keeps only what replays and the dashboard
	// show, its metadata included (see docs/operations.md, "Sizing Redis").
	KeepPayload bool
	// Dedup collapses this submission with others of the same work
	// (docs/deduplication.md); nil means none. Not part of the
	// idempotency fingerprint.
	Dedup *Dedup
}

// NoRetention is the retention (Submission.Retention,
// DeploymentConfig.SucceededRetention, FailedRetention) that keeps nothing: a
// task is deleted as it finishes, unless its idempotency record still needs
// it for replays.
const NoRetention time.Duration = -1

// Defaults shared by the Client, Worker, Admin and the configuration.
const (
	// DefaultMaxPayloadBytes bounds a payload's compact JSON by default.
	DefaultMaxPayloadBytes = 262144
	// DefaultStreamMaxLen caps each queue's event stream, each queue's
	// listing index and the audit stream by default.
	DefaultStreamMaxLen = 100000
)

// Retention defaults and bound.
const (
	// DefaultSucceededRetention is how long a succeeded task is kept.
	DefaultSucceededRetention = time.Hour
	// DefaultFailedRetention is how long a failed, cancelled, expired or
	// (out of the DLQ index) dead-lettered task is kept.
	DefaultFailedRetention = 7 * 24 * time.Hour
	// MaxRetention is the longest retention that may be set.
	MaxRetention = 366 * 24 * time.Hour
)

// Validation limits.
const (
	DefaultQueue       = "default"
	DefaultPriority    = 5
	MaxTimeout         = time.Hour
	MaxDelay           = 365 * 24 * time.Hour
	MaxMetadataBytes   = 4096
	MaxJSONDepth       = 64
	MaxIdempotencyKey  = 255
	MaxConcurrencyKey  = 128
	maxTypeLen         = 128
	defaultMaxAttempts = 5
)

// ValidQueueName reports whether name is an acceptable queue name:
// ^[a-z0-9][a-z0-9_-]{0,63}$.
func ValidQueueName(name string) bool {
	if len(name) == 0 || len(name) > 64 || name[0] == '_' || name[0] == '-' {
		return false
	}
	for i := range len(name) {
		if !queueNameByte(name[i]) {
			return false
		}
	}
	return true
}

// queueNameByte reports whether c may appear in a queue name: [a-z0-9_-].
func queueNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// validName reports whether s is 1..maxLen characters of [A-Za-z0-9_.:-]
// (task types and key prefixes). A loop, not a regexp: it runs on every
// submission.
func validName(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := range len(s) {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

// nameByte reports whether c may appear in a task type or key prefix:
// [A-Za-z0-9_.:-].
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-'
}

// checkPrefix validates a KeyPrefix: braces would break the {queue} hash tag.
func checkPrefix(p string) error {
	if !validName(p, 64) {
		return fmt.Errorf("dtq: KeyPrefix %q must be 1..64 characters of A-Z a-z 0-9 _ . : -", p)
	}
	return nil
}

// limits are the configured bounds a submission is validated against.
type limits struct {
	maxAttempts     int
	defaultTimeout  time.Duration
	maxPayloadBytes int
	taskTypes       map[string]bool // nil = any type
}

// normalized is a valid submission with every default applied.
type normalized struct {
	queue          string
	storage        string // the partition of queue the task goes to (Client.route)
	typ            string
	payload        []byte
	priority       int
	maxAttempts    int
	timeoutMS      int64
	availableAt    int64 // epoch ms
	delayMS        int64
	runAt          int64 // epoch ms, 0 = not given
	expiresAt      int64 // epoch ms, 0 = none
	expiresGiven   bool
	ttlSeconds     int64 // as given, 0 = not given
	metadata       []byte
	key            string
	fingerprint    string
	concurrencyKey string
	retention      int64 // seconds; 0 = the workers' setting, -1 = none
	keepPayload    bool
	dedup          *rdb.DedupSpec // nil = none
}

// normalize validates s and applies defaults. It is the one validation
// function behind both the Go client and the HTTP API. now is creation time.
func normalize(s *Submission, lim *limits, now time.Time) (*normalized, error) {
	n := &normalized{queue: s.Queue, typ: s.Type}
	if n.queue == "" {
		n.queue = DefaultQueue
	}
	if !ValidQueueName(n.queue) {
		return nil, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$ (lowercase letters, digits, '_' and '-')")
	}
	if n.typ == "" {
		return nil, invalid("task_type", "is required")
	}
	if !validName(n.typ, maxTypeLen) {
		return nil, invalid("task_type", "must be 1..128 characters of A-Z a-z 0-9 _ . : -")
	}
	if lim.taskTypes != nil && !lim.taskTypes[n.typ] {
		return nil, &ValidationError{Field: "task_type", Message: fmt.Sprintf("%q is not a registered task type", n.typ), kind: ErrUnknownTaskType}
	}

	var err error
	if n.payload, err = objectJSON("payload", s.Payload); err != nil {
		return nil, err
	}
	if len(n.payload) > lim.maxPayloadBytes {
		return nil, &ValidationError{Field: "payload", kind: ErrPayloadTooLarge,
			Message: fmt.Sprintf("is %d bytes; the limit is %d bytes", len(n.payload), lim.maxPayloadBytes)}
	}
	if n.metadata, err = objectJSON("metadata", s.Metadata); err != nil {
		return nil, err
	}
	if len(n.metadata) > MaxMetadataBytes {
		return nil, invalid("metadata", "is %d bytes; the limit is %d bytes", len(n.metadata), MaxMetadataBytes)
	}

	n.priority = DefaultPriority
	if s.Priority != nil {
		if *s.Priority < 0 || *s.Priority > 9 {
			return nil, invalid("priority", "must be between 0 and 9 (9 is highest)")
		}
		n.priority = *s.Priority
	}
	n.maxAttempts = min(defaultMaxAttempts, lim.maxAttempts)
	if s.MaxAttempts != 0 {
		if s.MaxAttempts < 1 || s.MaxAttempts > lim.maxAttempts {
			return nil, invalid("max_attempts", "must be between 1 and %d", lim.maxAttempts)
		}
		n.maxAttempts = s.MaxAttempts
	}
	n.timeoutMS = lim.defaultTimeout.Milliseconds()
	if s.Timeout != 0 {
		if s.Timeout < time.Millisecond || s.Timeout > MaxTimeout {
			return nil, invalid("timeout_ms", "must be between 1 and 3600000 milliseconds")
		}
		n.timeoutMS = s.Timeout.Milliseconds()
	}

	created := now.UnixMilli()
	switch {
	case !s.RunAt.IsZero():
		n.runAt = s.RunAt.UnixMilli()
		if n.runAt-created > MaxDelay.Milliseconds() {
			return nil, invalid("run_at", "must be at most 365 days ahead")
		}
		n.availableAt = max(n.runAt, created)
	default:
		if s.Delay < 0 || s.Delay > MaxDelay {
			return nil, invalid("delay_ms", "must be between 0 and 31536000000 (365 days)")
		}
		n.delayMS = s.Delay.Milliseconds()
		n.availableAt = created + n.delayMS
	}

	expiryField := "ttl_seconds"
	switch {
	case !s.ExpiresAt.IsZero():
		n.expiresAt = s.ExpiresAt.UnixMilli()
		n.expiresGiven = true
		expiryField = "expires_at"
	case s.TTL != 0:
		if s.TTL < time.Second || s.TTL%time.Second != 0 {
			return nil, invalid("ttl_seconds", "must be a positive whole number of seconds")
		}
		n.ttlSeconds = int64(s.TTL / time.Second)
		n.expiresAt = created + s.TTL.Milliseconds()
	default:
		if ttl, ok, err := metadataTTL(n.metadata); err != nil {
			return nil, err
		} else if ok {
			n.expiresAt = created + ttl*1000
			expiryField = "metadata.ttl_seconds"
		}
	}
	if (n.expiresGiven || n.expiresAt != 0) && n.expiresAt <= n.availableAt {
		return nil, invalid(expiryField, "the expiry must be after the time the task becomes available")
	}

	if s.IdempotencyKey != "" {
		if n.key, err = idemkey.Normalize(s.IdempotencyKey, MaxIdempotencyKey); err != nil {
			return nil, &ValidationError{Field: "idempotency_key", Message: err.Error()}
		}
	}
	if s.ConcurrencyKey != "" {
		if len(s.ConcurrencyKey) > MaxConcurrencyKey {
			return nil, invalid("concurrency_key", "must be 1..128 characters")
		}
		for i := range len(s.ConcurrencyKey) {
			if c := s.ConcurrencyKey[i]; c < 0x21 || c > 0x7e {
				return nil, invalid("concurrency_key", "must be printable ASCII without spaces (0x21..0x7e)")
			}
		}
		n.concurrencyKey = s.ConcurrencyKey
	}
	n.keepPayload = s.KeepPayload
	switch {
	case s.Retention == NoRetention:
		n.retention = -1
	case s.Retention != 0:
		if s.Retention < time.Second || s.Retention > MaxRetention || s.Retention%time.Second != 0 {
			return nil, invalid("retention_seconds", "must be a whole number of seconds between 0 and %d (366 days)",
				int64(MaxRetention/time.Second))
		}
		n.retention = int64(s.Retention / time.Second)
	}
	if s.Dedup != nil {
		if n.dedup, err = normalizeDedup(s.Dedup, n.typ, n.payload); err != nil {
			return nil, err
		}
	}
	if n.dedup != nil && n.dedup.Mode == string(DedupDebounce) {
		// A debounced task waits its window before it may start.
		n.availableAt = max(n.availableAt, created+n.dedup.Window)
		if n.expiresAt != 0 && n.expiresAt <= n.availableAt {
			return nil, invalid(expiryField, "the expiry must be after the debounce window ends")
		}
	}
	if n.key != "" {
		n.fingerprint = n.computeFingerprint() // only a keyed submission is ever compared
	}
	return n, nil
}

// objectJSON returns v as compact JSON, which must be an object.
func objectJSON(field string, v any) ([]byte, error) {
	if b, ok := plainObjectJSON(v); ok {
		return b, nil // what json.Marshal would write, without reflection
	}
	var raw []byte
	compact := false // json.Marshal output is compact already
	switch p := v.(type) {
	case nil:
		return []byte("{}"), nil
	case json.RawMessage:
		raw = p
	case []byte:
		raw = p
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, invalid(field, "cannot be encoded as JSON: %v", err)
		}
		raw, compact = b, true
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return []byte("{}"), nil
	}
	if raw[0] != '{' {
		return nil, invalid(field, "must be a JSON object")
	}
	if d := jsonscan.Depth(raw); d > MaxJSONDepth {
		return nil, invalid(field, "nests %d levels deep; the limit is %d", d, MaxJSONDepth)
	}
	if !compact {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, invalid(field, "is not valid JSON: %v", err)
		}
		raw = buf.Bytes()
	}
	if at := jsonscan.LoneSurrogate(raw); at >= 0 {
		return nil, invalid(field, "has a lone UTF-16 surrogate escape at byte %d (\\ud800..\\udfff not in a high-low pair): "+
			"that is not Unicode text, decoders turn it into U+FFFD, and two such payloads would look alike; send the text as UTF-8 or a valid pair", at+1)
	}
	return raw, nil
}

// plainObjectJSON is objectJSON's answer for the common payload of a map
// of a few plain members (see plainStringMapJSON), written without
// reflection; ok is false for any other v.
func plainObjectJSON(v any) (b []byte, ok bool) {
	switch m := v.(type) {
	case map[string]string:
		return plainStringMapJSON(m)
	case map[string]any:
		return plainAnyMapJSON(m)
	}
	return nil, false
}

// plainMaxMembers bounds the maps plainStringMapJSON and plainAnyMapJSON
// write: their keys are sorted on the stack.
const plainMaxMembers = 16

// plainStringMapJSON is the text json.Marshal writes for m, written
// without reflection for the common payload of a few plain strings: ok is
// false (json.Marshal must write it) unless every key and value is a
// jsonscan.PlainString, which encoding/json writes as it is between
// quotes. A nil map is {}, objectJSON's answer for null.
func plainStringMapJSON(m map[string]string) (b []byte, ok bool) {
	return plainMapJSON(m, plainStringLen, appendPlainString)
}

// plainAnyMapJSON is plainStringMapJSON for a map of values of any type:
// each must be a plain string, a bool, an int, an int64 or nil.
func plainAnyMapJSON(m map[string]any) (b []byte, ok bool) {
	return plainMapJSON(m, plainAnyLen, appendPlainAny)
}

// plainMapJSON writes m as json.Marshal would, its keys sorted, when every
// key is a jsonscan.PlainString, there are at most plainMaxMembers of them
// and valueLen accepts every value (reporting at most the bytes
// appendValue writes for it); ok is false otherwise.
func plainMapJSON[V any](m map[string]V, valueLen func(V) (int, bool), appendValue func([]byte, V) []byte) (b []byte, ok bool) {
	if len(m) > plainMaxMembers {
		return nil, false
	}
	var buf [plainMaxMembers]string
	keys := buf[:0]
	size := 2
	for k, v := range m {
		n, ok := valueLen(v)
		if !ok || !jsonscan.PlainString(k) {
			return nil, false
		}
		keys = append(keys, k)
		size += len(k) + 4 + n
	}
	slices.Sort(keys) // encoding/json's order
	b = make([]byte, 0, size)
	for i, k := range keys {
		b = appendMemberKey(b, i, k)
		b = appendValue(b, m[k])
	}
	return appendObjectEnd(b), true
}

// plainStringLen is the length of plain string v between quotes; ok is
// false unless encoding/json writes it as it is.
func plainStringLen(v string) (int, bool) {
	return len(v) + 2, jsonscan.PlainString(v)
}

func appendPlainString(b []byte, v string) []byte {
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}

// plainAnyLen is plainStringLen for a plain string, a bool, an int, an
// int64 or nil; ok is false for any other value.
func plainAnyLen(v any) (int, bool) {
	switch v := v.(type) {
	case string:
		return plainStringLen(v)
	case bool, int, int64, nil:
		return 20, true // the longest int64
	}
	return 0, false
}

func appendPlainAny(b []byte, v any) []byte {
	switch v := v.(type) {
	case string:
		return appendPlainString(b, v)
	case bool:
		return strconv.AppendBool(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	}
	return append(b, "null"...)
}

// appendMemberKey opens member i of an object: '{' or ',', then the plain
// key k and ':'.
func appendMemberKey(b []byte, i int, k string) []byte {
	if i == 0 {
		b = append(b, '{')
	} else {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

// appendObjectEnd closes an object appendMemberKey opened ("{}" when it
// has no members).
func appendObjectEnd(b []byte) []byte {
	if len(b) == 0 {
		b = append(b, '{')
	}
	return append(b, '}')
}

func metadataTTL(meta []byte) (int64, bool, error) {
	if !bytes.Contains(meta, []byte(`"ttl_seconds"`)) {
		return 0, false, nil // the common case: no need to decode the metadata
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil {
		return 0, false, err // objectJSON vouched for it: not expected
	}
	raw, ok := m["ttl_seconds"]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	ttl, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || ttl < 1 || ttl > math.MaxInt32 {
		return 0, false, invalid("metadata.ttl_seconds", "must be a positive whole number of seconds")
	}
	return ttl, true, nil
}
