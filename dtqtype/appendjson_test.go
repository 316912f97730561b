package dtqtype

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jsonAppender is what TaskInfo and DLQEntry offer besides json.Marshal.
type jsonAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// requireSameAsMarshal checks that v.AppendJSON appends exactly the bytes
// of json.Marshal(v), and that it fails, leaving the buffer as it was,
// exactly when json.Marshal fails.
func requireSameAsMarshal(t testing.TB, v jsonAppender) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := v.AppendJSON([]byte("prefix:"))
	if wantErr != nil {
		require.Error(t, err, "json.Marshal failed (%v); AppendJSON gave %q", wantErr, got)
		require.Equal(t, "prefix:", string(got))
		return
	}
	require.NoError(t, err, "json.Marshal gave %q", want)
	require.Equal(t, "prefix:"+string(want), string(got))
}

func ptr[T any](v T) *T { return &v }

// finishedTask has every field set, a history and a result.
func finishedTask() *TaskInfo {
	at := time.Date(2024, 2, 29, 23, 59, 58, 123456789, time.UTC)
	return &TaskInfo{
		ID: "0190a5c4e2c07000800000000000abcd", Queue: "emails", Type: "send_receipt",
		Payload: json.RawMessage(`{"order_id":42}`), Priority: 7, MaxAttempts: 5, Attempt: 2,
		TimeoutMS: 30000, IdempotencyKey: ptr("order-42"), ConcurrencyKey: "acct-7", DedupKey: "doc-9", Status: StatusSucceeded,
		CreatedAt: Time{at}, AvailableAt: Time{at.Add(time.Second)}, ExpiresAt: Time{at.Add(24 * time.Hour)},
		Metadata: json.RawMessage(`{"trace":"abc"}`), CancelRequested: true,
		Execution: Execution{StartedAt: Time{at.Add(2 * time.Second)}, FinishedAt: Time{at.Add(3 * time.Second)},
			DurationMS: ptr(int64(1000)), WorkerID: "w-1", ErrorClass: "Timeout", ErrorMessage: "too slow",
			Retryable: ptr(false), RetryDelayMS: ptr(int64(-1))},
		Attempts: []AttemptRecord{
			{Attempt: 1, WorkerID: "w-0", StartedAt: Time{at}, FinishedAt: Time{at.Add(time.Millisecond)},
				DurationMS: 1, Outcome: "failed", ErrorClass: "IOError", ErrorMessage: "reset"},
			{Attempt: 2, WorkerID: "w-1", StartedAt: Time{at}, Outcome: "succeeded"},
		},
		Result: json.RawMessage(`[1,"two",{"three":3.0}]`), ResultTruncated: true, ResultExpired: true,
		PreviousAttempts: 3,
	}
}

func TestTaskInfoAppendJSON(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 6, 1, 8, 9, 10, 0, time.UTC)
	with := func(edit func(*TaskInfo)) *TaskInfo {
		ti := finishedTask()
		edit(ti)
		return ti
	}
	tests := []struct {
		name string
		task *TaskInfo
	}{
		{"nil", nil},
		{"zero", &TaskInfo{}},
		{"all fields set", finishedTask()},
		{"just submitted", &TaskInfo{ID: "t", Queue: "default", Type: "echo", Payload: json.RawMessage(`{}`),
			MaxAttempts: 3, Attempt: 1, Status: StatusQueued, CreatedAt: Time{at}, AvailableAt: Time{at},
			Attempts: []AttemptRecord{}}},
		{"empty omitempty fields", with(func(ti *TaskInfo) {
			ti.Execution.WorkerID, ti.Execution.ErrorClass, ti.Execution.ErrorMessage = "", "", ""
			ti.Attempts[0].ErrorClass, ti.Attempts[0].ErrorMessage = "", ""
		})},
		{"only some omitempty fields", with(func(ti *TaskInfo) {
			ti.Execution.WorkerID, ti.Execution.ErrorClass = "", ""
			ti.Attempts[0].ErrorClass = ""
		})},
		{"nil pointers", with(func(ti *TaskInfo) {
			ti.IdempotencyKey, ti.Execution.DurationMS, ti.Execution.Retryable, ti.Execution.RetryDelayMS = nil, nil, nil, nil
		})},
		{"retryable true", with(func(ti *TaskInfo) { ti.Execution.Retryable = ptr(true) })},
		{"nil and empty attempts", with(func(ti *TaskInfo) { ti.Attempts = nil })},
		{"extreme numbers", with(func(ti *TaskInfo) {
			ti.Priority, ti.MaxAttempts, ti.TimeoutMS = -1<<63, 1<<63-1, -1<<63
			ti.Execution.DurationMS, ti.Attempts[0].DurationMS = ptr(int64(1<<63-1)), -5
		})},
		{"html", with(func(ti *TaskInfo) {
			ti.ID, ti.Queue, ti.Status = "<script>alert(1)</script>", "a&b", "x>y"
			ti.Execution.ErrorMessage, ti.Attempts[1].Outcome = "<&>", "&amp;"
		})},
		{"quotes and backslashes", with(func(ti *TaskInfo) { ti.ID, ti.Type = `say "hi"`, `C:\tmp\`; ti.IdempotencyKey = ptr(`\"`) })},
		{"control bytes", with(func(ti *TaskInfo) {
			ti.ID = "\x00\x01\b\f\n\r\t\x0b\x1b\x1f\x7f end"
			ti.Attempts[0].WorkerID = "\n"
		})},
		{"unicode", with(func(ti *TaskInfo) {
			ti.Type, ti.Queue = "héllo 世界 🎉 \U0010ffff \ufffd", "\u2028line\u2029para"
			ti.Execution.ErrorMessage = "x\u2028"
		})},
		{"invalid utf-8", with(func(ti *TaskInfo) {
			ti.ID = "\xff\xfe"
			ti.Queue = "a\xc3"                  // truncated sequence at the end
			ti.Type = "\xe2\x80z"               // truncated in the middle
			ti.Status = "\xed\xa0\x80"          // an encoded surrogate
			ti.IdempotencyKey = ptr("\xc0\xaf") // overlong
			ti.Execution.WorkerID = "\xf4\x90\x80\x80"
		})},
		{"times", with(func(ti *TaskInfo) {
			ti.CreatedAt = Time{time.Date(2024, 1, 2, 3, 4, 5, 999999999, time.UTC)} // truncated, not rounded
			ti.AvailableAt = Time{time.Date(2024, 12, 31, 23, 59, 59, 1000000, time.FixedZone("x", -7*3600))}
			ti.ExpiresAt = Time{}
			ti.Execution.StartedAt = Time{time.Unix(0, 0)}
			ti.Execution.FinishedAt = Time{time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)} // not the zero Time
			ti.Attempts[0].StartedAt = MillisTime(1700000000123)
			ti.Attempts[0].FinishedAt = Time{time.Date(2025, 3, 30, 1, 30, 0, 0, time.FixedZone("y", 5*3600+1800))}
		})},
		{"years outside four digits", with(func(ti *TaskInfo) {
			ti.CreatedAt = Time{time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}
			ti.AvailableAt = Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
			ti.ExpiresAt = Time{time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC)}
			ti.Execution.StartedAt = Time{time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)}
			ti.Execution.FinishedAt = Time{time.Date(123456, 1, 1, 0, 0, 0, 0, time.UTC)}
		})},
		{"raw JSON with whitespace", with(func(ti *TaskInfo) {
			ti.Payload = json.RawMessage(" \t\r\n{ \"a\" :\n [ 1 ,\t2.5e-3 , -0 , true , false , null , { } , [ ] ] , \"b\" : \"x y\" }\n")
			ti.Metadata = json.RawMessage("  42  ")
			ti.Result = json.RawMessage("\n\"  spaced string  \"\n")
		})},
		{"raw JSON with html and separators", with(func(ti *TaskInfo) {
			ti.Payload = json.RawMessage("{\"<k>\":\"a&b \u2028 \u2029 \\u2028 \\u003c\"}")
			ti.Metadata = json.RawMessage(`["&&", "<<>>"]`)
		})},
		{"raw JSON passes invalid utf-8 through", with(func(ti *TaskInfo) {
			ti.Payload = json.RawMessage("{\"k\":\"\xff\xfe \xe2\x80 \xe2\x80\xa8\"}")
		})},
		{"raw JSON escapes", with(func(ti *TaskInfo) {
			ti.Payload = json.RawMessage(`"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00 \uABCD"`)
		})},
		{"raw JSON nested at the limit", with(func(ti *TaskInfo) {
			ti.Payload = json.RawMessage(strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting))
			ti.Result = json.RawMessage(strings.Repeat(`{"a":`, maxNesting) + "1" + strings.Repeat("}", maxNesting))
		})},
		{"raw JSON nested past the limit", with(func(ti *TaskInfo) {
			ti.Payload = json.RawMessage(strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1))
		})},
		{"empty raw JSON", with(func(ti *TaskInfo) { ti.Metadata = json.RawMessage{} })},
		{"invalid payload", with(func(ti *TaskInfo) { ti.Payload = json.RawMessage(`{"a":}`) })},
		{"invalid metadata", with(func(ti *TaskInfo) { ti.Metadata = json.RawMessage(`[1,]`) })},
		{"invalid result", with(func(ti *TaskInfo) { ti.Result = json.RawMessage(`"unterminated`) })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			requireSameAsMarshal(t, tt.task)
			requireSameAsMarshal(t, &DLQEntry{TaskInfo: tt.task, FailedAt: Time{at}})
		})
	}
}

func TestDLQEntryAppendJSON(t *testing.T) {
	t.Parallel()
	for _, e := range []*DLQEntry{nil, {}, {FailedAt: MillisTime(1)}, {TaskInfo: finishedTask()}} {
		requireSameAsMarshal(t, e)
	}
}

// TestAppendRaw compares appendRaw with encoding/json on raw JSON alone,
// valid and not.
func TestAppendRaw(t *testing.T) {
	t.Parallel()
	tests := []string{
		// valid
		`0`, `-0`, `1`, `-12`, `1.5`, `-0.0`, `1e5`, `1E+5`, `1e-05`, `123456789012345678901234567890`,
		`true`, `false`, `null`, `""`, `"a"`, `[]`, `{}`, `[[]]`, `[{}]`, `{"":{}}`, ` [ 1 , [ 2 ] ] `,
		`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, "\"\x7f\"", "\"\u2028\"", "\"<>&\"",
		`"\u0000"`, `"\uFFFF"`, `"\/"`, "\t\n\r 1 \t\n\r",
		// invalid
		``, ` `, `{`, `}`, `[`, `]`, `[1`, `[1,`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`,
		`{"a" 1}`, `{1:1}`, `{a:1}`, `{'a':1}`, `{"a":1]`, `[1}`, `01`, `-`, `-a`, `1.`, `.5`, `1e`, `1e+`,
		`+1`, `0x10`, `1 2`, `[] []`, `tru`, `truex`, `nul`, `nulll`, `False`, `NaN`, `Infinity`, `"`,
		`"abc`, `"\"`, `"\x"`, `"\u12"`, `"\u12G4"`, `"\U1234"`, "\"\x00\"", "\"\n\"", "\"\x1f\"",
		"\x00", "\v1", "\f1", "\u00a01", "1\u00a0", `[1]x`, `{"a":1}}`, `"a"b`,
	}
	for _, raw := range tests {
		want, wantErr := json.Marshal(json.RawMessage(raw))
		got, err := appendRaw([]byte("p"), json.RawMessage(raw), "payload")
		if wantErr != nil {
			require.Error(t, err, "%q", raw)
			require.ErrorContains(t, err, "payload is not valid JSON")
			continue
		}
		require.NoError(t, err, "%q", raw)
		require.Equal(t, "p"+string(want), string(got), "%q", raw)
	}
}

func TestTimeAppendJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 5))
	for range 20000 {
		tm := Time{time.Unix(r.Int64N(1<<40)-1<<39, r.Int64N(1e9))}
		if r.IntN(2) == 0 {
			tm.Time = tm.In(time.FixedZone("z", r.IntN(26*3600)-13*3600))
		}
		want := `"` + tm.UTC().Format(TimeLayout) + `"`
		require.Equal(t, want, string(tm.appendJSON(nil)), "%v", tm.Time)
		got, err := tm.MarshalJSON()
		require.NoError(t, err)
		require.Equal(t, want, string(got))
	}
	got, err := Time{}.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, "null", string(got))
}

// stringFragments are what encoding/json treats specially in a Go string.
var stringFragments = []string{
	"", "a", "task-1", " ", "<", ">", "&", `"`, `\`, "/", "\x00", "\x1f", "\b", "\f", "\n", "\r", "\t",
	"\x7f", "é", "世界", "🎉", "\u2028", "\u2029", "\xff", "\xc3", "\xe2\x80", "\xed\xa0\x80", "\U0010ffff", "\ufffd",
}

// rawStringFragments are valid inside a raw JSON string, special or not
// to encoding/json's compaction.
var rawStringFragments = []string{
	"", "a", " ", "<", ">", "&", `\"`, `\\`, `\/`, `\n`, `\u00e9`, `\u2028`, "\u2028", "\u2029", "é", "\xff",
	"\x7f", "\xe2\x80", "\xe2\x80\xaa", "\xe2",
}

// taskGen makes random tasks for comparing AppendJSON with json.Marshal.
// Every field it leaves unset is still encoded, so a field added to the
// types without AppendJSON learning of it fails the comparison.
type taskGen struct{ r *rand.Rand }

func (g taskGen) string() string {
	var sb strings.Builder
	for range g.r.IntN(6) {
		sb.WriteString(stringFragments[g.r.IntN(len(stringFragments))])
	}
	return sb.String()
}

func (g taskGen) time() Time {
	r := g.r
	switch r.IntN(6) {
	case 0:
		return Time{}
	case 1:
		return MillisTime(r.Int64N(4e12))
	case 2:
		return Time{time.Unix(r.Int64N(4e11)-2e11, r.Int64N(1e9))} // years about -4400..8300
	case 3:
		return Time{time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(time.FixedZone("z", r.IntN(26*3600)-13*3600))}
	case 4:
		return Time{time.Unix(r.Int64(), r.Int64N(1e9))}
	}
	return Time{time.Date(9999+r.IntN(3), 12, 31, 23, 59, 59, r.IntN(1e9), time.UTC)}
}

func (g taskGen) space() string {
	return [...]string{"", "", "", " ", "\n\t", "\r\n  "}[g.r.IntN(6)]
}

// value makes valid JSON with random whitespace.
func (g taskGen) value(depth int) string {
	r := g.r
	kinds := 8
	if depth > 3 {
		kinds = 5
	}
	var v string
	switch r.IntN(kinds) {
	case 0:
		v = [...]string{"null", "true", "false"}[r.IntN(3)]
	case 1:
		v = [...]string{"0", "-1", "3.25", "1e9", "-0.5E-3", "12345678901234567890", "-0"}[r.IntN(7)]
	case 2, 3, 4:
		v = g.rawString()
	case 5:
		var elems []string
		for range r.IntN(4) {
			elems = append(elems, g.value(depth+1))
		}
		v = "[" + g.space() + strings.Join(elems, ","+g.space()) + "]"
	default:
		var members []string
		for range r.IntN(4) {
			members = append(members, g.space()+g.rawString()+g.space()+":"+g.value(depth+1))
		}
		v = "{" + strings.Join(members, ",") + g.space() + "}"
	}
	return g.space() + v + g.space()
}

func (g taskGen) rawString() string {
	var sb strings.Builder
	sb.WriteByte('"')
	for range g.r.IntN(5) {
		sb.WriteString(rawStringFragments[g.r.IntN(len(rawStringFragments))])
	}
	sb.WriteByte('"')
	return sb.String()
}

// raw makes a raw JSON field: mostly valid, sometimes nil, empty or
// corrupted by a truncation or a stray byte.
func (g taskGen) raw() json.RawMessage {
	r := g.r
	switch r.IntN(40) {
	case 0, 1, 2, 3, 4, 5:
		return nil
	case 6:
		return json.RawMessage{}
	case 7:
		v := g.value(0)
		return json.RawMessage(v[:r.IntN(len(v)+1)])
	case 8, 9:
		v := g.value(0)
		at := r.IntN(len(v) + 1)
		stray := [...]string{"\x00", "}", "]", ",", ":", `"`, `\`, "x", "1", " ", "-", ".", "e", "\n"}[r.IntN(14)]
		return json.RawMessage(v[:at] + stray + v[at:])
	}
	return json.RawMessage(g.value(0))
}

func (g taskGen) int64Ptr() *int64 {
	if g.r.IntN(3) == 0 {
		return nil
	}
	return ptr(g.r.Int64() - g.r.Int64())
}

func (g taskGen) task() *TaskInfo {
	r := g.r
	ti := &TaskInfo{
		ID: g.string(), Queue: g.string(), Type: g.string(), Payload: g.raw(),
		Priority: r.IntN(10), MaxAttempts: int(r.Int64()), Attempt: r.IntN(5) - 1, TimeoutMS: r.Int64N(1e6),
		Status: Status(g.string()), CreatedAt: g.time(), AvailableAt: g.time(), ExpiresAt: g.time(),
		Metadata: g.raw(), CancelRequested: r.IntN(2) == 0, Result: g.raw(),
		ResultTruncated: r.IntN(2) == 0, ResultExpired: r.IntN(2) == 0, PreviousAttempts: r.IntN(3),
		Execution: Execution{StartedAt: g.time(), FinishedAt: g.time(), DurationMS: g.int64Ptr(),
			WorkerID: g.string(), ErrorClass: g.string(), ErrorMessage: g.string(), RetryDelayMS: g.int64Ptr()},
	}
	if r.IntN(2) == 0 {
		ti.IdempotencyKey = ptr(g.string())
	}
	if r.IntN(2) == 0 {
		ti.WorkflowID, ti.Ref = g.string(), g.string()
	}
	if r.IntN(2) == 0 {
		at := g.time()
		ti.Progress, ti.ProgressAt, ti.LogAttempts = g.raw(), &at, r.IntN(3)
	}
	if r.IntN(3) > 0 {
		ti.Execution.Retryable = ptr(r.IntN(2) == 0)
	}
	if r.IntN(3) > 0 {
		ti.Attempts = []AttemptRecord{}
		for i := range r.IntN(4) {
			ti.Attempts = append(ti.Attempts, AttemptRecord{Attempt: i + 1, WorkerID: g.string(),
				StartedAt: g.time(), FinishedAt: g.time(), DurationMS: r.Int64N(1e5), Outcome: g.string(),
				ErrorClass: g.string(), ErrorMessage: g.string()})
		}
	}
	return ti
}

func TestTaskInfoAppendJSONRandom(t *testing.T) {
	t.Parallel()
	g := taskGen{r: rand.New(rand.NewPCG(20240229, 42))}
	for range 5000 {
		ti := g.task()
		requireSameAsMarshal(t, ti)
		requireSameAsMarshal(t, &DLQEntry{TaskInfo: ti, FailedAt: g.time()})
	}
}

func FuzzTaskInfoAppendJSON(f *testing.F) {
	f.Add("t1", "emails", []byte(`{"order_id":42}`), []byte(" { \"a\" : [ 1 , null ] } "), []byte(`"<ok>"`),
		int64(1700000000), int64(123456789), int64(5), uint16(0))
	f.Add("\xff<&>\u2028", "\x00\n", []byte("[\"\xe2\x80\xa9\"]"), []byte(`{"a":}`), []byte(nil),
		int64(-62135596800), int64(1), int64(-1), uint16(0xffff))
	f.Add("", "", []byte(``), []byte(`01`), []byte(`[[[]]]`), int64(0), int64(0), int64(0), uint16(0x15))
	f.Fuzz(func(t *testing.T, s1, s2 string, payload, metadata, result []byte, sec, nsec, n int64, flags uint16) {
		at := Time{time.Unix(sec, nsec)}
		ti := &TaskInfo{
			ID: s1, Queue: s2, Type: s1 + s2, Payload: payload, Metadata: metadata, Result: result,
			Priority: int(n % 10), MaxAttempts: int(n), Attempt: int(n >> 3), TimeoutMS: n, Status: Status(s2),
			CreatedAt: at, AvailableAt: Time{time.Unix(0, nsec)}, ExpiresAt: MillisTime(n),
			CancelRequested: flags&1 != 0, ResultTruncated: flags&2 != 0, ResultExpired: flags&4 != 0,
			Execution:  Execution{StartedAt: at, WorkerID: s2, ErrorMessage: s1},
			WorkflowID: s2, Ref: s1,
		}
		// Fuzzed byte slices are never nil; let flags make the raw fields nil.
		if flags&8 != 0 {
			ti.Payload = nil
		}
		if flags&16 != 0 {
			ti.Metadata = nil
		}
		if flags&32 != 0 {
			ti.Result = nil
		}
		if flags&64 != 0 {
			ti.IdempotencyKey = &s1
			ti.Execution.DurationMS, ti.Execution.Retryable = &n, ptr(flags&128 != 0)
		}
		if flags&256 != 0 {
			ti.Attempts = []AttemptRecord{{Attempt: 1, WorkerID: s1, StartedAt: at, DurationMS: n,
				Outcome: s2, ErrorClass: s1, ErrorMessage: s2}}
		}
		requireSameAsMarshal(t, ti)
		requireSameAsMarshal(t, &DLQEntry{TaskInfo: ti, FailedAt: at})
	})
}

// benchTask is a typical submission answer.
func benchTask() *TaskInfo {
	now := time.Date(2025, 6, 1, 12, 0, 0, 250_000_000, time.UTC)
	return &TaskInfo{
		ID: "01977f3c0e2a7000a3c1f00000000042", Queue: "emails", Type: "send_receipt",
		Payload: json.RawMessage(`{"order_id":42,"customer":{"email":"ada@example.com","name":"Ada Lovelace"},` +
			`"items":[{"sku":"A-100","qty":2,"price":19.99},{"sku":"B-7","qty":1,"price":5}],"note":"gift wrap, fragile"}`),
		Priority: 5, MaxAttempts: 3, Attempt: 1, TimeoutMS: 30000, IdempotencyKey: ptr("order-42-receipt"),
		Status: StatusQueued, CreatedAt: Time{now}, AvailableAt: Time{now}, ExpiresAt: Time{now.Add(24 * time.Hour)},
		Metadata: json.RawMessage(`{"source":"checkout","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"}`),
		Attempts: []AttemptRecord{},
	}
}

func BenchmarkTaskInfoJSON(b *testing.B) {
	ti := benchTask()
	b.Run("reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(ti); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 2048) // reused, as the API reuses its pooled buffers
		for b.Loop() {
			var err error
			if buf, err = ti.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
