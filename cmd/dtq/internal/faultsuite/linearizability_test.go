package faultsuite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
)

// The sequential model of docs/idempotency.md the linearizability check holds the API
// to, per idempotency key (keys are independent). No worker runs, so a task
// is live (queued) until it is cancelled.

// keyState is one key's state: the task its record names ("" = none) and
// whether that task has ended (cancelled).
type keyState struct {
	id    string
	fp    int
	ended bool
}

// opKind names a recorded operation.
type opKind int

const (
	opSubmit opKind = iota // POST /tasks with the key and payload variant fp
	opCancel               // POST /tasks/{id}/cancel
	opRead                 // GET /tasks/{id}
)

// opInput is what an operation asked.
type opInput struct {
	kind opKind
	key  string
	fp   int    // submit: which payload
	id   string // cancel, read: the task
}

// outcome is what an operation was told.
type outcome int

const (
	outCreated    outcome = iota // 202
	outReplay                    // 200 duplicate
	outInProgress                // 409 IDEMPOTENCY_IN_PROGRESS
	outMismatch                  // 422
	outNotWritten                // 503 REDIS_UNAVAILABLE: nothing was written
	outUnknown                   // OUTCOME_UNKNOWN, a transport error: may or may not have happened
	outDone                      // cancel: 202; read: found
	outNotFound                  // read or cancel: 404
)

// opOutput is what an operation was told: the outcome, the task named and,
// for a read, whether the task had ended.
type opOutput struct {
	out   outcome
	id    string
	ended bool
}

// submissionModel is docs/idempotency.md's check order for one queue without workers.
var submissionModel = porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range h {
			k := op.Input.(opInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{keyState{}} },
	Step: func(state, input, output any) []any {
		s, in, o := state.(keyState), input.(opInput), output.(opOutput)
		same := []any{s}
		switch in.kind {
		case opSubmit:
			switch {
			case o.out == outNotWritten:
				return same
			case o.out == outUnknown:
				// Either it did nothing (or was refused), or it created its task.
				if s.id == "" && o.id != "" {
					return []any{s, keyState{id: o.id, fp: in.fp}}
				}
				return same
			case s.id == "":
				if o.out == outCreated {
					return []any{keyState{id: o.id, fp: in.fp}}
				}
			case o.id != s.id:
			case s.fp != in.fp:
				if o.out == outMismatch {
					return same
				}
			case !s.ended:
				if o.out == outInProgress {
					return same
				}
			default:
				if o.out == outReplay {
					return same
				}
			}
			return nil
		case opCancel:
			ours := in.id == s.id
			switch {
			case o.out == outUnknown:
				if ours {
					return []any{s, keyState{id: s.id, fp: s.fp, ended: true}}
				}
				return same
			case o.out == outNotWritten:
				return same
			case o.out == outDone && ours:
				return []any{keyState{id: s.id, fp: s.fp, ended: true}}
			case o.out == outNotFound && !ours:
				return same
			}
			return nil
		default: // read
			ours := in.id == s.id
			switch {
			case o.out == outUnknown, o.out == outNotWritten:
				return same
			case o.out == outDone && ours && o.ended == s.ended:
				return same
			case o.out == outNotFound && !ours:
				return same
			}
			return nil
		}
	},
	DescribeOperation: func(input, output any) string {
		in, o := input.(opInput), output.(opOutput)
		names := []string{"created", "replay", "in_progress", "mismatch", "not_written", "unknown", "done", "not_found"}
		switch in.kind {
		case opSubmit:
			return fmt.Sprintf("submit(%s, v%d) -> %s %s", in.key, in.fp, names[o.out], o.id)
		case opCancel:
			return fmt.Sprintf("cancel(%s) -> %s", in.id, names[o.out])
		}
		return fmt.Sprintf("read(%s) -> %s ended=%v", in.id, names[o.out], o.ended)
	},
	DescribeState: func(state any) string {
		s := state.(keyState)
		return fmt.Sprintf("{%s v%d ended=%v}", s.id, s.fp, s.ended)
	},
}

// call runs one operation against the API.
func (g *ingestRig) call(hc *http.Client, in opInput) opOutput {
	var req *http.Request
	switch in.kind {
	case opSubmit:
		body, _ := json.Marshal(map[string]any{"task_type": "work", "payload": map[string]int{"v": in.fp}})
		req, _ = http.NewRequest(http.MethodPost, g.url+"/api/v1/tasks", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", in.key)
	case opCancel:
		req, _ = http.NewRequest(http.MethodPost, g.url+"/api/v1/tasks/"+in.id+"/cancel", nil)
	default:
		req, _ = http.NewRequest(http.MethodGet, g.url+"/api/v1/tasks/"+in.id, nil)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return opOutput{out: outUnknown}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var b struct {
		TaskID string `json:"task_id"`
		Status string `json:"status"`
		Task   struct {
			Status string `json:"status"`
		} `json:"task"`
		Code    string `json:"code"`
		Details struct {
			TaskID string `json:"task_id"`
		} `json:"details"`
	}
	_ = json.Unmarshal(raw, &b)
	id := b.TaskID
	if id == "" {
		id = b.Details.TaskID
	}
	switch {
	case resp.StatusCode == http.StatusServiceUnavailable && b.Code == "REDIS_UNAVAILABLE" && in.kind == opSubmit:
		return opOutput{out: outNotWritten}
	case resp.StatusCode == http.StatusServiceUnavailable:
		return opOutput{out: outUnknown, id: id}
	case in.kind == opSubmit && resp.StatusCode == http.StatusAccepted:
		return opOutput{out: outCreated, id: id}
	case in.kind == opSubmit && resp.StatusCode == http.StatusOK:
		return opOutput{out: outReplay, id: id}
	case in.kind == opSubmit && resp.StatusCode == http.StatusConflict:
		return opOutput{out: outInProgress, id: id}
	case in.kind == opSubmit && resp.StatusCode == http.StatusUnprocessableEntity:
		return opOutput{out: outMismatch, id: id}
	case resp.StatusCode == http.StatusNotFound:
		return opOutput{out: outNotFound}
	case in.kind == opCancel && resp.StatusCode == http.StatusAccepted:
		return opOutput{out: outDone}
	case in.kind == opRead && resp.StatusCode == http.StatusOK:
		return opOutput{out: outDone, ended: b.Status == "cancelled"}
	}
	panic(fmt.Sprintf("%+v answered %d: %s", in, resp.StatusCode, raw))
}

// TestSubmissionsAreLinearizable records concurrent keyed submissions,
// cancels and reads (call and return times) against the real API and
// Redis while the fault proxy lets ingest and cancel calls reach Redis and
// cuts their connection before the reply (go-redis then sends them again),
// and resets every connection now and then; the history must be explainable
// by docs/idempotency.md executed one operation at a time. An answer whose outcome is
// unknown (503 OUTCOME_UNKNOWN, or the HTTP call failing) may have taken
// effect at any time after its call, or not at all.
func TestSubmissionsAreLinearizable(t *testing.T) {
	t.Parallel()
	checkLinearizable(t, newIngestRig(t))
}

// TestPartitionedSubmissionsAreLinearizable is
// TestSubmissionsAreLinearizable on a queue of 8 partitions: each key's
// records and task are in its partition, so the history holds per key as
// on one.
func TestPartitionedSubmissionsAreLinearizable(t *testing.T) {
	t.Parallel()
	checkLinearizable(t, newIngestRig(t, 8))
}

// checkLinearizable records and checks the history of
// TestSubmissionsAreLinearizable against g.
func checkLinearizable(t *testing.T, g *ingestRig) {
	const clients, opsEach, keys = 6, 60, 2
	start := time.Now()
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		seen    = map[string]string{} // key -> a task id an answer named
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ingest, cancel := []byte(rdb.ScriptHash("ingest")), []byte(rdb.ScriptHash("cancel"))
		calls := [][]byte{ingest, ingest, cancel}
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			g.proxy.CutAfter(calls[i%3], 1)
			time.Sleep(15 * time.Millisecond) // the fault's pace, not a wait for anything
			if i%12 == 11 {
				g.proxy.ResetAll()
			}
			mu.Lock()
			n := len(history)
			mu.Unlock()
			if n >= clients*opsEach {
				g.proxy.CutAfter(nil, 0)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			hc := &http.Client{Timeout: 20 * time.Second}
			for i := range opsEach {
				// Clients move through the keys at about the same pace, so a
				// new key is submitted by several of them at once.
				key := fmt.Sprintf("k%d", i/2+rng.IntN(keys))
				in := opInput{kind: opSubmit, key: key}
				if rng.IntN(10) == 0 {
					in.fp = 1 // the same key with other work
				}
				mu.Lock()
				id := seen[key]
				mu.Unlock()
				if id != "" {
					switch rng.IntN(10) {
					case 0, 1:
						in = opInput{kind: opCancel, key: key, id: id}
					case 2, 3, 4:
						in = opInput{kind: opRead, key: key, id: id}
					}
				}
				call := time.Since(start).Nanoseconds()
				out := g.call(hc, in)
				ret := time.Since(start).Nanoseconds()
				if out.out == outUnknown {
					ret = math.MaxInt64 // it may take effect at any time after its call
				}
				mu.Lock()
				if out.id != "" && in.kind == opSubmit {
					seen[key] = out.id
				}
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	<-done
	require.Positive(t, g.proxy.Cuts(), "no reply was lost: the test tested nothing")
	counts := map[outcome]int{}
	for _, op := range history {
		counts[op.Output.(opOutput).out]++
	}
	res, info := porcupine.CheckOperationsVerbose(submissionModel.ToModel(), history, time.Minute)
	if res != porcupine.Ok {
		file := filepath.Join(os.TempDir(), fmt.Sprintf("dtq-linearizability-%d.html", time.Now().UnixNano()))
		if err := porcupine.VisualizePath(submissionModel.ToModel(), info, file); err == nil {
			t.Logf("visualization of the history: %s", file)
		}
	}
	t.Logf("LINEARIZABILITY ops=%d cuts=%d created=%d replay=%d in_progress=%d mismatch=%d unknown=%d not_written=%d result=%s",
		len(history), g.proxy.Cuts(), counts[outCreated], counts[outReplay], counts[outInProgress], counts[outMismatch],
		counts[outUnknown], counts[outNotWritten], res)
	require.Equal(t, porcupine.Ok, res, "the history of submissions, cancels and reads is not linearizable")
}
