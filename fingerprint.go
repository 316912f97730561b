package dtq

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strconv"

	"github.com/dtq-io/dtq/internal/jsonscan"
)

// The idempotency fingerprint hashes one canonical JSON text of the fields
// that define the work: the object encoding/json writes for them, with the
// payload decoded (numbers kept as written) and encoded again, so that key
// order and spacing do not count. Decoding into maps and encoding them
// again was a third of a keyed Submit's client CPU; jsonscan.AppendCanonical
// writes the same text straight from the payload's bytes (keys sorted,
// values copied) for every payload whose strings need no escaping, which
// is nearly all of them.

// canonicalWork returns the JSON text the fingerprint hashes. Both ways
// give the same bytes; FuzzCanonicalWork compares them.
func (n *normalized) canonicalWork() []byte {
	if jsonscan.PlainString(n.typ) {
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
	if n.concurrencyKey != "" {
		canon["concurrency_key"] = n.concurrencyKey
	}
	if n.dedup != nil {
		canon["dedup"] = map[string]string{"key": n.dedup.Key, "mode": n.dedup.Mode}
	}
	return mustJSON(canon)
}

// appendWork writes the object reencodedWork encodes, keys in the same
// (sorted) order, the payload put in canonical form in place (see
// jsonscan.AppendCanonical, whose false it answers). The task type must be a
// plain string.
func (n *normalized) appendWork(b []byte) ([]byte, bool) {
	num := func(b []byte, key string, v int64) []byte {
		b = append(b, key...)
		return strconv.AppendInt(b, v, 10)
	}
	b = append(b, '{')
	// The partition key's fields, when given (docs/partitions.md): a
	// submission without them hashes as it always did.
	if n.concurrencyKey != "" {
		b = append(b, `"concurrency_key":`...)
		b = append(b, mustJSON(n.concurrencyKey)...)
		b = append(b, ',')
	}
	if n.dedup != nil {
		b = append(b, `"dedup":{"key":`...)
		b = append(b, mustJSON(n.dedup.Key)...)
		b = append(b, `,"mode":`...)
		b = append(b, mustJSON(n.dedup.Mode)...)
		b = append(b, "},"...)
	}
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
	b, ok := jsonscan.AppendCanonical(b, n.payload, MaxJSONDepth)
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

// computeFingerprint hashes the canonical JSON of the fields that define the
// work (see canonicalWork): metadata is excluded; the payload counts with
// its keys sorted and numbers kept exactly as written. It is the SHA-256's
// 32 bytes, the form the task hash stores.
func (n *normalized) computeFingerprint() string {
	sum := sha256.Sum256(n.canonicalWork())
	return string(sum[:])
}
