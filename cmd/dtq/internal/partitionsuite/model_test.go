package partitionsuite_test

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// The sequential model of docs/idempotency.md the histories are checked
// against, per idempotency key (keys are independent). It is the fault
// suite's model (cmd/dtq/internal/faultsuite) with workers running: a live
// task may end (succeed) at any moment without an operation of the
// history, so every step may first end it.

// keyState is one key's state: the task its record names ("" = none), the
// payload variant it was submitted with, whether a cancel was requested,
// whether that task has ended and whether it ended cancelled.
type keyState struct {
	id        string
	fp        int
	requested bool
	ended     bool
	cancelled bool
}

// anyTask is the id of a task a submission whose answer was lost may have
// created: any id an answer names later.
const anyTask = "?"

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
	api  string // the API host it went through (not part of the model)
}

// outcome is what an operation was told.
type outcome int

const (
	outCreated    outcome = iota // 202
	outReplay                    // 200 duplicate
	outInProgress                // 409 IDEMPOTENCY_IN_PROGRESS
	outMismatch                  // 422
	outNotWritten                // 503 REDIS_UNAVAILABLE: nothing was written (docs/http-api.md)
	outUnknown                   // OUTCOME_UNKNOWN, not replicated, a transport error, a read of an isolated master
	outDone                      // cancel: 202; read: found
	outNotFound                  // read or cancel: 404
	outTerminal                  // cancel: 409 TASK_TERMINAL (the task had ended)
)

var outcomeNames = []string{"created", "replay", "in_progress", "mismatch", "not_written", "unknown", "done", "not_found", "terminal"}

// opOutput is what an operation was told: the outcome, the task named and,
// for a read, whether the task had ended, and cancelled.
type opOutput struct {
	out       outcome
	id        string
	ended     bool
	cancelled bool
}

// step applies one operation to a state in which the task has not ended
// by itself meanwhile.
func step(s keyState, in opInput, o opOutput) []keyState {
	same := []keyState{s}
	switch in.kind {
	case opSubmit:
		switch {
		case o.out == outNotWritten:
			return same
		case o.out == outUnknown:
			// Either it did nothing (or was refused), or it created its task:
			// one whose id the answer did not say is anyTask until an answer
			// names it.
			if s.id == "" {
				id := o.id
				if id == "" {
					id = anyTask
				}
				return []keyState{s, {id: id, fp: in.fp}}
			}
			return same
		case s.id == "":
			if o.out == outCreated {
				return []keyState{{id: o.id, fp: in.fp}}
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
		requested := keyState{id: s.id, fp: s.fp, requested: true}
		cancelled := keyState{id: s.id, fp: s.fp, requested: true, ended: true, cancelled: true}
		switch {
		case o.out == outUnknown:
			if ours && !s.ended {
				return []keyState{s, requested, cancelled}
			}
			return same
		case o.out == outNotWritten:
			return same
		case o.out == outDone && ours && !s.ended:
			// A queued task ends at once; a running one once its handler
			// sees the request (or it succeeds first).
			return []keyState{requested, cancelled}
		case o.out == outDone && ours && s.cancelled:
			return same // cancelling a cancelled task again
		case o.out == outTerminal && ours && s.ended && !s.cancelled:
			return same
		case o.out == outNotFound && !ours:
			return same
		}
		return nil
	default: // read
		ours := in.id == s.id
		switch {
		case o.out == outUnknown, o.out == outNotWritten:
			return same
		case o.out == outDone && ours && o.ended == s.ended && o.cancelled == s.cancelled:
			return same
		case o.out == outNotFound && !ours:
			return same
		}
		return nil
	}
}

// submissionModel is docs/idempotency.md's check order for one queue whose
// workers end tasks at any time.
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
		starts := []keyState{s}
		named := in.id
		if in.kind == opSubmit {
			named = o.id
		}
		if s.id == anyTask && named != "" {
			bound := s
			bound.id = named
			starts = append(starts, bound) // the task an unknown submit made
		}
		for _, st := range starts {
			if st.id != "" && !st.ended {
				// A worker finished it meanwhile, or it saw the cancel
				// request.
				starts = append(starts, keyState{id: st.id, fp: st.fp, requested: st.requested, ended: true})
				if st.requested {
					starts = append(starts, keyState{id: st.id, fp: st.fp, requested: true, ended: true, cancelled: true})
				}
			}
		}
		var out []any
		for _, st := range starts {
			for _, next := range step(st, in, o) {
				dup := false
				for _, x := range out {
					if x == next {
						dup = true
					}
				}
				if !dup {
					out = append(out, next)
				}
			}
		}
		return out
	},
	DescribeOperation: func(input, output any) string {
		in, o := input.(opInput), output.(opOutput)
		switch in.kind {
		case opSubmit:
			return fmt.Sprintf("submit(%s, v%d) -> %s %s", in.key, in.fp, outcomeNames[o.out], o.id)
		case opCancel:
			return fmt.Sprintf("cancel(%s) -> %s", in.id, outcomeNames[o.out])
		}
		return fmt.Sprintf("read(%s) -> %s ended=%v cancelled=%v", in.id, outcomeNames[o.out], o.ended, o.cancelled)
	},
	DescribeState: func(state any) string {
		s := state.(keyState)
		return fmt.Sprintf("{%s v%d requested=%v ended=%v cancelled=%v}", s.id, s.fp, s.requested, s.ended, s.cancelled)
	},
}
