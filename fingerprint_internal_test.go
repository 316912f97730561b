package dtq

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/jsonscan"
	"github.com/dtq-io/dtq/internal/rdb"
)

// workVariants are the shapes of the fields around the payload: delay or
// run_at, expiry given or a ttl or neither.
var workVariants = []normalized{
	{typ: "email.send", priority: 5, maxAttempts: 5, timeoutMS: 30000},
	{typ: "t", priority: 0, maxAttempts: 1, timeoutMS: 1, delayMS: 1500, ttlSeconds: 60},
	{typ: "t", priority: 9, maxAttempts: 25, timeoutMS: 3600000, runAt: 1764000000000, expiresGiven: true, expiresAt: 1765000000000},
	{typ: "t", priority: 1, maxAttempts: 2, timeoutMS: 5, runAt: 1764000000000, ttlSeconds: 7},
	// The partition key's fields (docs/partitions.md).
	{typ: "t", priority: 5, maxAttempts: 5, timeoutMS: 30000, concurrencyKey: `tenant "<a&b>"`},
	{typ: "t", priority: 5, maxAttempts: 5, timeoutMS: 30000, concurrencyKey: "c", dedup: &rdb.DedupSpec{Key: "d<1>", Mode: "drop"}},
}

// TestFingerprintCoversThePartitionKey: the concurrency key and the dedup
// spec are part of the work, so a repeat of an idempotency key with
// another one is a mismatch on one partition as it is new work on
// another; a submission without them hashes as before.
func TestFingerprintCoversThePartitionKey(t *testing.T) {
	t.Parallel()
	base := normalized{typ: "t", priority: 5, maxAttempts: 5, timeoutMS: 30000, payload: []byte(`{}`)}
	require.Equal(t, `{"delay_ms":0,"max_attempts":5,"payload":{},"priority":5,"task_type":"t","timeout_ms":30000}`,
		string(base.canonicalWork()), "unchanged without the partition key's fields")
	seen := map[string]bool{base.computeFingerprint(): true}
	for _, mod := range []func(*normalized){
		func(n *normalized) { n.concurrencyKey = "a" },
		func(n *normalized) { n.concurrencyKey = "b" },
		func(n *normalized) { n.dedup = &rdb.DedupSpec{Key: "a", Mode: "drop"} },
		func(n *normalized) { n.dedup = &rdb.DedupSpec{Key: "a", Mode: "debounce"} },
	} {
		n := base
		mod(&n)
		fp := n.computeFingerprint()
		require.False(t, seen[fp], string(n.canonicalWork()))
		seen[fp] = true
	}
}

func TestCanonicalWorkMatchesReencoding(t *testing.T) {
	t.Parallel()
	for _, payload := range []string{
		`{}`,
		`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`,
		`{"":0,"a":-0.5e+10,"b":1E3,"c":[],"d":[{}]}`,
		`{"id":"o-1","lines":["a","b"],"n":12.50}`,
		`{"z":{"y":[{"x":1,"w":2}],"b":0},"a":[1,2,{"z":1,"y":2}],"m":"n"}`,
		`{"b":1,"a":2,"c":3,"a":4}`, // written the long way (see jsonscan's tests)
		`{"a": 1}`,
		`{"a":"x<y"}`,
		`{"a":"caf\u00e9"}`,
		`{"a":"café"}`,
		`{"k":"a\"b"}`,
	} {
		for _, v := range workVariants {
			n := v
			n.payload = []byte(payload)
			require.Equal(t, string(n.reencodedWork()), string(n.canonicalWork()), payload)
		}
	}
	// A task type that needs escaping takes the long way, with the same result.
	n := workVariants[0]
	n.typ, n.payload = `a<b&"c"`, []byte(`{"a":1}`)
	require.Equal(t, string(n.reencodedWork()), string(n.canonicalWork()))
}

// TestCanonicalWorkOfMarshaledPayloads: what json.Marshal writes for maps
// and structs, and a wide object, are written from their bytes.
func TestCanonicalWorkOfMarshaledPayloads(t *testing.T) {
	t.Parallel()
	type order struct { // fields out of name order
		ID     string   `json:"id"`
		Amount float64  `json:"amount"`
		Lines  []string `json:"lines"`
	}
	for _, v := range []any{
		map[string]any{"user": 42, "email": "a@example.com", "tags": []string{"x"}, "nested": map[string]int{"b": 1, "a": 2}},
		order{Amount: 12.5, ID: "o-1", Lines: []string{"a", "b"}},
		wide(40), // more members than the sort's stack buffer holds
	} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		_, ok := jsonscan.AppendCanonical(nil, b, MaxJSONDepth)
		require.True(t, ok, string(b))
		n := workVariants[0]
		n.payload = b
		require.Equal(t, string(n.reencodedWork()), string(n.canonicalWork()))
	}
}

// wide is an object of n members whose keys json.Marshal writes unsorted.
func wide(n int) json.RawMessage {
	b := []byte{'{'}
	for i := n; i > 0; i-- {
		b = fmt.Appendf(b, `"k%03d":%d,`, i, i)
	}
	b[len(b)-1] = '}'
	return b
}

// FuzzCanonicalWork: whatever the payload, the text the fingerprint hashes
// is the one encoding/json gives.
func FuzzCanonicalWork(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":1}`, `{"b":1,"a":2}`, `{"a":[1,{"c":"d"}],"b":-0.0e-0}`,
		`{"a":"<&>"}`, `{"a":"\u00e9\n"}`, `{"a" : 1 }`, `{"a":1,"a":1}`, `{"x":[[[[]]]]}`} {
		f.Add(seed, 0)
		f.Add(seed, 3)
	}
	f.Fuzz(func(t *testing.T, payload string, variant int) {
		raw, err := objectJSON("payload", json.RawMessage(payload))
		if err != nil {
			return // refused at submission: never fingerprinted
		}
		n := workVariants[(variant%len(workVariants)+len(workVariants))%len(workVariants)]
		n.payload = raw
		if got, want := n.canonicalWork(), n.reencodedWork(); string(got) != string(want) {
			t.Fatalf("payload %s: fast %s, encoding/json %s", raw, got, want)
		}
	})
}

// BenchmarkFingerprint: a keyed submission's fingerprint of a ~100-byte
// payload: sorted already (json.Marshal of a map), in another order (as
// most other languages' encoders write it), and the long way (a task type
// to escape: decoded and encoded again).
func BenchmarkFingerprint(b *testing.B) {
	sorted, _ := json.Marshal(map[string]any{"order_id": "o-12345", "amount": 12.5, "currency": "EUR",
		"lines": []string{"sku-1", "sku-2"}, "customer": map[string]any{"id": 42, "tier": "gold"}})
	unsorted := []byte(`{"order_id":"o-12345","amount":12.5,"currency":"EUR","lines":["sku-1","sku-2"],` +
		`"customer":{"tier":"gold","id":42}}`)
	for _, c := range []struct {
		name, typ string
		payload   []byte
	}{{"sorted", "order.pay", sorted}, {"unsorted", "order.pay", unsorted}, {"reencoded", "order<pay>", sorted}} {
		b.Run(c.name, func(b *testing.B) {
			n := workVariants[0]
			n.typ, n.payload = c.typ, c.payload
			b.ReportAllocs()
			for b.Loop() {
				_ = n.computeFingerprint()
			}
		})
	}
}
