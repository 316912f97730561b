package dtq_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// fill returns a T with every exported field set from values, by name. It
// fails when a field of T has no value, or a value names no field, so that
// a field added to T fails the tests that use it until they cover it.
func fill[T any](t *testing.T, values map[string]any) T {
	t.Helper()
	var out T
	v := reflect.ValueOf(&out).Elem()
	seen := map[string]bool{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		x, ok := values[f.Name]
		require.True(t, ok, "%s.%s has no value here: add one, and make Submission.MarshalJSON write it", v.Type(), f.Name)
		v.Field(i).Set(reflect.ValueOf(x))
		require.False(t, v.Field(i).IsZero(), "%s.%s: the value must not be the zero value", v.Type(), f.Name)
		seen[f.Name] = true
	}
	for name := range values {
		require.True(t, seen[name], "%s has no field %s", v.Type(), name)
	}
	return out
}

// TestSubmissionJSONRoundTrip: every field of a Submission survives
// MarshalJSON and UnmarshalJSON, Dedup's fields included. A field added to
// dtq.Submission or dtq.Dedup fails here until the codec has it.
func TestSubmissionJSONRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 1, 2, 3, 4, 5, 6_000_007, time.UTC)
	dedup := fill[dtq.Dedup](t, map[string]any{
		"Key": "doc-42", "By": []string{"task_type", "payload.user"}, "Mode": dtq.DedupDebounce,
		"TTL": 10 * time.Minute, "Window": 5*time.Second + time.Nanosecond, "MaxWait": time.Hour,
	})
	full := fill[dtq.Submission](t, map[string]any{
		"Queue": "emails", "Type": "send", "Payload": any(json.RawMessage(`{"user":"a","n":[1,2.50]}`)),
		"Priority": new(0), "MaxAttempts": 3, "Timeout": 90 * time.Second, "Delay": 1500 * time.Millisecond,
		"RunAt": at, "ExpiresAt": at.Add(time.Hour), "TTL": time.Minute,
		"Metadata":       any(json.RawMessage(`{"src":"db"}`)),
		"IdempotencyKey": "order-1", "ConcurrencyKey": "acme", "Retention": 2 * time.Hour, "KeepPayload": true,
		"Dedup": &dedup,
	})
	cases := []struct {
		name string
		in   dtq.Submission
	}{
		{"every field", full},
		{"type only", dtq.Submission{Type: "echo"}},
		{"no retention", dtq.Submission{Type: "x", Retention: dtq.NoRetention}},
		{"dedup by", dtq.Submission{Type: "x", Dedup: &dtq.Dedup{By: []string{"task_type"}, Mode: dtq.DedupDrop}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(c.in)
			require.NoError(t, err)
			var back dtq.Submission
			require.NoError(t, json.Unmarshal(b, &back), "%s", b)
			require.Equal(t, c.in, back, "%s", b)
			// A pointer marshals the same, and decoding overwrites every field.
			b2, err := json.Marshal(&c.in)
			require.NoError(t, err)
			require.Equal(t, string(b), string(b2))
			back = dtq.Submission{Type: "old", Queue: "old", MaxAttempts: 9}
			require.NoError(t, json.Unmarshal(b, &back), "%s", b)
			require.Equal(t, c.in, back, "%s", b)
		})
	}
}

func TestSubmissionMarshalJSONWritesTheHTTPForm(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	cases := []struct {
		name string
		in   dtq.Submission
		want string
	}{
		{"minimal", dtq.Submission{Type: "echo"}, `{"task_type":"echo"}`},
		{"go values", dtq.Submission{Queue: "emails", Type: "send", Payload: map[string]any{"to": "a"},
			Priority: new(7), RunAt: at, ExpiresAt: at.Add(time.Hour), Retention: 2 * time.Hour,
			Dedup: &dtq.Dedup{Key: "k", Mode: dtq.DedupDrop, TTL: time.Minute}},
			`{"task_type":"send","queue":"emails","payload":{"to":"a"},"priority":7,
			"run_at":"2027-01-02T03:04:05.006Z","expires_at":"2027-01-02T04:04:05.006Z","retention_seconds":7200,
			"dedup":{"key":"k","mode":"drop","ttl":"1m0s"}}`},
		{"delay and ttl", dtq.Submission{Type: "x", Delay: 1500 * time.Millisecond, TTL: time.Minute}, `{"task_type":"x","delay_ms":1500,"ttl_seconds":60}`},
		{"no retention", dtq.Submission{Type: "x", Retention: dtq.NoRetention}, `{"task_type":"x","retention_seconds":0}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.in)
		require.NoError(t, err, c.name)
		require.JSONEq(t, c.want, string(b), c.name)
	}
	bad := []struct {
		name  string
		in    dtq.Submission
		field string
	}{
		{"payload not an object", dtq.Submission{Type: "x", Payload: []int{1}}, "payload"},
		{"metadata not JSON", dtq.Submission{Type: "x", Metadata: json.RawMessage(`{`)}, "metadata"},
		{"sub-millisecond timeout", dtq.Submission{Type: "x", Timeout: 1500 * time.Microsecond}, "timeout_ms"},
		{"negative delay", dtq.Submission{Type: "x", Delay: -time.Second}, "delay_ms"},
		{"fractional ttl", dtq.Submission{Type: "x", TTL: 1500 * time.Millisecond}, "ttl_seconds"},
		{"fractional retention", dtq.Submission{Type: "x", Retention: 1500 * time.Millisecond}, "retention_seconds"},
		{"negative dedup window", dtq.Submission{Type: "x", Dedup: &dtq.Dedup{Key: "k", Mode: dtq.DedupDebounce, Window: -1}}, "dedup.window"},
	}
	for _, c := range bad {
		_, err := json.Marshal(c.in)
		var ve *dtq.ValidationError
		require.ErrorAs(t, err, &ve, c.name)
		require.Equal(t, c.field, ve.Field, c.name)
	}
}

// randomFields draws a value for each field of T by name, from gens; a
// field of T without a generator, or a generator naming no field, fails the
// test, so a field added to T fails until it has one (and the codec carries
// it). A generator may return the zero value: the form must omit it and
// read it back as zero.
func randomFields[T any](t *testing.T, r *rand.Rand, gens map[string]func(*rand.Rand) any) T {
	t.Helper()
	var out T
	v := reflect.ValueOf(&out).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		g, ok := gens[f.Name]
		require.True(t, ok, "%s.%s has no generator here: add one, and make Submission.MarshalJSON write it", v.Type(), f.Name)
		if x := g(r); x != nil {
			v.Field(i).Set(reflect.ValueOf(x))
		}
	}
	for name := range gens {
		_, ok := v.Type().FieldByName(name)
		require.True(t, ok, "%s has no field %s", v.Type(), name)
	}
	return out
}

// TestSubmissionJSONRoundTripProperty: random submissions, each field set
// or left zero at random, survive MarshalJSON and UnmarshalJSON unchanged.
func TestSubmissionJSONRoundTripProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	some := func(r *rand.Rand) bool { return r.IntN(3) > 0 }
	name := func(prefix string) func(*rand.Rand) any {
		return func(r *rand.Rand) any {
			if !some(r) {
				return nil
			}
			return fmt.Sprintf("%s-%d", prefix, r.IntN(1000))
		}
	}
	object := func(r *rand.Rand) any {
		if !some(r) {
			return nil
		}
		return json.RawMessage(fmt.Sprintf(`{"n":%d,"s":"x%d","a":[1,{"b":null}]}`, r.IntN(1e6), r.IntN(10)))
	}
	whole := func(unit, most time.Duration) func(*rand.Rand) any {
		return func(r *rand.Rand) any {
			if !some(r) {
				return nil
			}
			return time.Duration(1+r.Int64N(int64(most/unit))) * unit
		}
	}
	at := func(r *rand.Rand) any {
		if !some(r) {
			return nil
		}
		return time.UnixMilli(1_700_000_000_000 + r.Int64N(1e12)).Add(time.Duration(r.IntN(1e6))).UTC()
	}
	positive := func(r *rand.Rand) any {
		if !some(r) {
			return nil
		}
		return time.Duration(1 + r.Int64N(int64(24*time.Hour)))
	}
	modes := []dtq.DedupMode{dtq.DedupDrop, dtq.DedupThrottle, dtq.DedupDebounce, dtq.DedupReplace, dtq.DedupKeepLast}
	dedupGens := map[string]func(*rand.Rand) any{
		"Key": name("doc"),
		"By": func(r *rand.Rand) any {
			if !some(r) {
				return nil
			}
			return []string{"task_type", fmt.Sprintf("payload.f%d", r.IntN(10))}[:1+r.IntN(2)]
		},
		"Mode":    func(r *rand.Rand) any { return modes[r.IntN(len(modes))] },
		"TTL":     positive,
		"Window":  positive,
		"MaxWait": positive,
	}
	gens := map[string]func(*rand.Rand) any{
		"Queue": name("q"), "Type": name("t"), "Payload": object, "Metadata": object,
		"Priority": func(r *rand.Rand) any {
			if !some(r) {
				return nil
			}
			return new(r.IntN(10))
		},
		"MaxAttempts": func(r *rand.Rand) any {
			if !some(r) {
				return nil
			}
			return 1 + r.IntN(100)
		},
		"Timeout": whole(time.Millisecond, dtq.MaxTimeout), "Delay": whole(time.Millisecond, dtq.MaxDelay),
		"TTL": whole(time.Second, 1000*time.Hour), "RunAt": at, "ExpiresAt": at,
		"IdempotencyKey": name("order"), "ConcurrencyKey": name("tenant"),
		"Retention": func(r *rand.Rand) any {
			switch r.IntN(3) {
			case 0:
				return nil
			case 1:
				return dtq.NoRetention
			}
			return whole(time.Second, dtq.MaxRetention)(r)
		},
		"KeepPayload": func(r *rand.Rand) any { return some(r) },
		"Dedup": func(r *rand.Rand) any {
			if !some(r) {
				return nil
			}
			d := randomFields[dtq.Dedup](t, r, dedupGens)
			return &d
		},
	}
	for range 500 {
		in := randomFields[dtq.Submission](t, r, gens)
		b, err := json.Marshal(in)
		require.NoError(t, err)
		var back dtq.Submission
		require.NoError(t, json.Unmarshal(b, &back), "%s", b)
		require.Equal(t, in, back, "%s", b)
	}
}

// TestNodeJSONRoundTrip: a workflow node keeps its own fields beside its
// submission's through MarshalJSON and UnmarshalJSON (Node embeds
// Submission, whose methods would otherwise drop them).
func TestNodeJSONRoundTrip(t *testing.T) {
	t.Parallel()
	full := fill[dtq.Node](t, map[string]any{
		"Ref": "resize", "Deps": []string{"fetch", "scan"}, "OnDepFailure": dtq.DepContinue,
		"Submission": dtq.Submission{Queue: "cpu", Type: "resize", Payload: json.RawMessage(`{"w":10}`), Delay: time.Second},
	})
	for _, in := range []dtq.Node{full, {Ref: "a", Submission: dtq.Submission{Type: "echo"}}} {
		b, err := json.Marshal(in)
		require.NoError(t, err)
		var back dtq.Node
		require.NoError(t, json.Unmarshal(b, &back), "%s", b)
		require.Equal(t, in, back, "%s", b)
	}
	b, err := json.Marshal(full)
	require.NoError(t, err)
	require.JSONEq(t, `{"ref":"resize","deps":["fetch","scan"],"on_dep_failure":"continue",
		"task_type":"resize","queue":"cpu","payload":{"w":10},"delay_ms":1000}`, string(b))
	var n dtq.Node
	err = json.Unmarshal([]byte(`{"ref":7,"task_type":"x"}`), &n)
	var ve *dtq.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "ref", ve.Field)
}
