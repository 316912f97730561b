package rdb

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestKeyNames(t *testing.T) {
	t.Parallel()
	k := NewKeys("dtq")
	cases := []struct {
		name     string
		got      string
		want     string
		perQueue bool
	}{
		{"stream p0", k.Stream("emails", 0), "dtq:stream:{emails}:p0", true},
		{"stream p9", k.Stream("emails", 9), "dtq:stream:{emails}:p9", true},
		{"task prefix", k.TaskPrefix("emails"), "dtq:task:{emails}:", true},
		{"task", k.Task("emails", "0190a5c4e2c07000800000000000000a"), "dtq:task:{emails}:0190a5c4e2c07000800000000000000a", true},
		{"result prefix", k.ResultPrefix("emails"), "dtq:result:{emails}:", true},
		{"result", k.Result("emails", "abc"), "dtq:result:{emails}:abc", true},
		{"idempotency prefix", k.IdempotencyPrefix("emails"), "dtq:idempotency:{emails}:", true},
		{"idempotency", k.Idempotency("emails", "order-42"), "dtq:idempotency:{emails}:order-42", true},
		{"idempotency with braces in the key", k.Idempotency("emails", "{x}"), "dtq:idempotency:{emails}:{x}", true},
		{"schedule", k.Schedule("emails"), "dtq:schedule:{emails}", true},
		{"lease", k.Lease("emails"), "dtq:lease:{emails}", true},
		{"expiry", k.Expiry("emails"), "dtq:expiry:{emails}", true},
		{"depth", k.Depth("emails"), "dtq:depth:{emails}", true},
		{"recent", k.Recent("emails"), "dtq:listing:{emails}", true},
		{"dlq", k.DLQ("emails"), "dtq:dlq:{emails}", true},
		{"events", k.Events("emails"), "dtq:events:{emails}", true},
		{"paused", k.Paused("emails"), "dtq:paused:{emails}", true},
		{"stats prefix", k.StatsPrefix("emails"), "dtq:stats:{emails}:", true},
		{"stats", k.Stats("emails", 29000000), "dtq:stats:{emails}:29000000", true},
		{"cancel channel", k.CancelChannel("emails"), "dtq:cancel:{emails}", true},
		{"fair flag", k.FairOn("emails"), "dtq:fairon:{emails}", true},
		{"fair state", k.FairState("emails"), "dtq:fair:{emails}", true},
		{"fair keys", k.FairKeys("emails"), "dtq:fairkeys:{emails}", true},
		{"fair delay", k.FairDelay("emails"), "dtq:fairdelay:{emails}", true},
		{"key rate", k.KeyRate("emails"), "dtq:keyrate:{emails}", true},
		{"fair active p3", k.FairActive("emails", 3), "dtq:fairact:{emails}:p3", true},
		{"key queue", k.KeyQueue("emails", 3, "acme"), "dtq:keyq:{emails}:p3:acme", true},
		{"key queue of keyless tasks", k.KeyQueue("emails", 0, ""), "dtq:keyq:{emails}:p0:", true},
		{"key queue with braces in the key", k.KeyQueue("emails", 9, "{x}"), "dtq:keyq:{emails}:p9:{x}", true},
		{"queues", k.Queues(), "dtq:queues", false},
		{"workers", k.Workers(), "dtq:workers", false},
		{"worker", k.Worker("host-1"), "dtq:worker:host-1", false},
		{"audit", k.Audit(), "dtq:audit", false},
		{"lease secret", k.LeaseSecret(), "dtq:lease_secret", false},
		{"system events", k.SysEvents(), "dtq:events:_sys", false},
		{"operation", k.Operation("receipt:42"), "dtq:op:receipt:42", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, c.got)
			require.True(t, strings.HasPrefix(c.got, k.Prefix()+":"))
			if c.perQueue {
				require.Equal(t, HashSlot("{emails}"), HashSlot(c.got), "per-queue keys share the queue's slot")
			} else {
				require.NotContains(t, c.got, "{", "global keys carry no hash tag")
			}
		})
	}
}

func TestKeyPrefixIsUsedEverywhere(t *testing.T) {
	t.Parallel()
	k := NewKeys("t42")
	require.Equal(t, "t42", k.Prefix())
	for _, key := range []string{
		k.Stream("q", 3), k.Task("q", "id"), k.Result("q", "id"), k.Idempotency("q", "k"),
		k.Schedule("q"), k.Lease("q"), k.Expiry("q"), k.Depth("q"), k.Recent("q"), k.DLQ("q"),
		k.Events("q"), k.Paused("q"), k.Stats("q", 1), k.CancelChannel("q"),
		k.Queues(), k.Workers(), k.WorkersOfKey("k"), k.Worker("w"), k.Audit(), k.LeaseSecret(), k.SysEvents(), k.Operation("o"),
		k.ScheduleNames(), k.ScheduleDue(), k.ScheduleDef("s"),
	} {
		require.True(t, strings.HasPrefix(key, "t42:"), key)
	}
}

// A key's workers index lives in the slot of the workers index, whatever
// the key's name, so that worker_admit updates both in one script.
func TestWorkersOfKeySharesTheWorkersSlot(t *testing.T) {
	t.Parallel()
	k := NewKeys("dtq")
	for _, name := range []string{"py", "{x}", "", "a:b:c", strings.Repeat("n", 300)} {
		key := k.WorkersOfKey(name)
		require.True(t, strings.HasPrefix(key, "dtq:workerkey:"), key)
		require.Equal(t, HashSlot(k.Workers()), HashSlot(key), key)
	}
	require.NotEqual(t, k.WorkersOfKey("a"), k.WorkersOfKey("b"))
}

// Schedule keys are global but share one hash tag, so that one script can
// change a schedule and its indexes; no queue can own that tag.
func TestScheduleKeys(t *testing.T) {
	t.Parallel()
	k := NewKeys("dtq")
	require.Equal(t, "dtq:schedules:{_schedules}:names", k.ScheduleNames())
	require.Equal(t, "dtq:schedules:{_schedules}:due", k.ScheduleDue())
	require.Equal(t, "dtq:schedules:{_schedules}:def:nightly.report", k.ScheduleDef("nightly.report"))
	require.True(t, strings.HasPrefix(k.ScheduleDef("x"), k.ScheduleDefPrefix()))
	for _, key := range []string{k.ScheduleNames(), k.ScheduleDue(), k.ScheduleDef("a"), k.ScheduleDef("zz-9")} {
		require.Equal(t, HashSlot("{_schedules}"), HashSlot(key), key)
	}
}

func TestStreamsHighestBandFirst(t *testing.T) {
	t.Parallel()
	k := NewKeys("dtq")
	got := k.Streams("q")
	require.Len(t, got, NumBands)
	for i, s := range got {
		require.Equal(t, k.Stream("q", NumBands-1-i), s)
	}
	require.Equal(t, "dtq:stream:{q}:p9", got[0])
	require.Equal(t, "dtq:stream:{q}:p0", got[NumBands-1])
}

func TestKeysOfDifferentQueuesAreSeparate(t *testing.T) {
	t.Parallel()
	k := NewKeys("dtq")
	// "a" and "ab" must not share keys even though one name prefixes the other.
	require.NotEqual(t, k.Depth("a"), k.Depth("ab"))
	require.False(t, strings.HasPrefix(k.Task("ab", "x"), k.TaskPrefix("a")))
	require.False(t, strings.HasPrefix(k.Idempotency("ab", "x"), k.IdempotencyPrefix("a")))
}

// A Keys from NewKeys hands out remembered names: each must be the name
// the zero Keys builds on every call.
func TestRememberedKeyNamesAreTheBuiltOnes(t *testing.T) {
	t.Parallel()
	remembered, built := NewKeys("dtq"), Keys{prefix: "dtq"}
	for _, queue := range []string{"q", "emails", "a-b_c", strings.Repeat("z", 64)} {
		for range 2 { // the first call builds the names, the second reads them
			for f := range numQueueKeys {
				require.Equal(t, built.q(f, queue), remembered.q(f, queue))
			}
			for band := range NumBands {
				require.Equal(t, built.Stream(queue, band), remembered.Stream(queue, band))
			}
			require.Equal(t, built.Task(queue, "id"), remembered.Task(queue, "id"))
			require.Equal(t, built.TaskEnded(queue, "id"), remembered.TaskEnded(queue, "id"))
		}
	}
	require.Equal(t, "dtq:task:{q}:id:ended", remembered.TaskEnded("q", "id"))
	require.Equal(t, "dtq:stream:{q}:p10", remembered.Stream("q", 10), "a band out of range is still spelled")
}

// Past maxCachedQueues queues, names are built on each call, and right.
func TestKeyNamesPastTheRememberedQueues(t *testing.T) {
	t.Parallel()
	k := NewKeys("dtq")
	for i := range maxCachedQueues + 10 {
		queue := "q" + strconv.Itoa(i)
		require.Equal(t, "dtq:depth:{"+queue+"}", k.Depth(queue))
		require.Equal(t, "dtq:stream:{"+queue+"}:p3", k.Stream(queue, 3))
	}
	require.Len(t, *k.cache.queues.Load(), maxCachedQueues)
}

// A remembered queue costs the garbage collector one pointer (the names'
// text), not one per name: with the names of 1,000 queues remembered, a
// collection of dtq api took three times as long as with one queue's
// (docs/benchmarks.md, "Many registered queues").
func TestRememberedNamesHoldOnePointer(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[queueKeyNames]()
	var pointers []string
	for f := range typ.Fields() {
		switch f.Type.Kind() { //nolint:exhaustive // the kinds that hold pointers
		case reflect.String, reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface, reflect.Chan, reflect.Func:
			pointers = append(pointers, f.Name)
		case reflect.Array:
			require.NotEqual(t, reflect.String, f.Type.Elem().Kind(), "field %s: an array of strings is a pointer per name", f.Name)
		}
	}
	require.Equal(t, []string{"all"}, pointers)
}

func TestKeyNamesConcurrently(t *testing.T) {
	t.Parallel()
	k := NewKeys("dtq")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				queue := "q" + strconv.Itoa((i+g)%20)
				if k.Events(queue) != "dtq:events:{"+queue+"}" {
					t.Errorf("events key of %s: %s", queue, k.Events(queue))
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkIngestCallKeys builds the key names one ingest call of one task
// sends (see ingestCall), which runs on every submission.
func BenchmarkIngestCallKeys(b *testing.B) {
	k := NewKeys("dtq")
	id := NewTaskID(1, time.Now())
	b.ReportAllocs()
	for b.Loop() {
		// Kept, as the call keeps them.
		keySink = append(keySink[:0],
			k.Depth("default"), k.Schedule("default"), k.Expiry("default"), k.Recent("default"),
			k.Events("default"), k.QueueNum("default"), k.FairOn("default"), k.FairState("default"),
			k.FairKeys("default"), k.Wake("default"), k.TaskPrefix("default"), k.ResultPrefix("default"),
			k.StreamPrefix("default"), k.FairActivePrefix("default"), k.KeyQueuePrefix("default"),
			k.Task("default", id), k.TaskEnded("default", id))
	}
}

var keySink []string
