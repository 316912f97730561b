package redistest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ScriptCall is one script invocation seen by a SlotChecker.
type ScriptCall struct {
	Command string // "eval", "evalsha", "evalsha_ro", "fcall", …
	Script  string // the script source, SHA1 or function name
	Keys    []string
	Args    []string
}

// SlotChecker is a go-redis hook that inspects every script call (EVAL,
// EVALSHA, their _RO forms and FCALL, alone or in a pipeline) and fails the
// test when the call's KEYS span more than one Redis Cluster slot: such a
// call works on a single Redis and fails on a Cluster. It also records every
// call so tests can make further assertions on the keys and arguments.
//
// The slot function is passed in (rdb.HashSlot) so that this package does
// not import the storage layer it is used to test.
type SlotChecker struct {
	tb   testing.TB
	slot func(key string) int

	mu         sync.Mutex
	calls      []ScriptCall
	violations []ScriptCall
}

// NewSlotChecker returns a checker that reports violations to tb with
// tb.Errorf, using slot to compute a key's Cluster slot.
func NewSlotChecker(tb testing.TB, slot func(key string) int) *SlotChecker {
	return &SlotChecker{tb: tb, slot: slot}
}

// CheckSlots installs a SlotChecker on c and returns it.
func CheckSlots(tb testing.TB, c *redis.Client, slot func(key string) int) *SlotChecker {
	tb.Helper()
	sc := NewSlotChecker(tb, slot)
	c.AddHook(sc)
	return sc
}

// Calls returns every script call seen so far, in order.
func (s *SlotChecker) Calls() []ScriptCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ScriptCall(nil), s.calls...)
}

// Violations returns the script calls whose keys span more than one slot.
func (s *SlotChecker) Violations() []ScriptCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ScriptCall(nil), s.violations...)
}

// DialHook implements redis.Hook.
func (s *SlotChecker) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (s *SlotChecker) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.inspect(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook; it also sees MULTI/EXEC
// pipelines.
func (s *SlotChecker) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			s.inspect(cmd)
		}
		return next(ctx, cmds)
	}
}

// scriptCommands are the commands shaped "<cmd> <script> <numkeys> key… arg…".
var scriptCommands = map[string]bool{
	"eval": true, "eval_ro": true, "evalsha": true, "evalsha_ro": true,
	"fcall": true, "fcall_ro": true,
}

func (s *SlotChecker) inspect(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 3 || !scriptCommands[strings.ToLower(argString(args[0]))] {
		return
	}
	n, err := strconv.Atoi(argString(args[2]))
	if err != nil || n < 0 || 3+n > len(args) {
		s.tb.Errorf("redistest: malformed script call %v", args)
		return
	}
	call := ScriptCall{Command: strings.ToLower(argString(args[0])), Script: argString(args[1])}
	for _, a := range args[3 : 3+n] {
		call.Keys = append(call.Keys, argString(a))
	}
	for _, a := range args[3+n:] {
		call.Args = append(call.Args, argString(a))
	}

	slots := map[int][]string{}
	for _, k := range call.Keys {
		sl := s.slot(k)
		slots[sl] = append(slots[sl], k)
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	if len(slots) > 1 {
		s.violations = append(s.violations, call)
	}
	s.mu.Unlock()
	if len(slots) > 1 {
		s.tb.Errorf("redistest: %s touches %d Cluster slots: %v", call.Command, len(slots), slots)
	}
}

// argString renders an argument as text: strings and byte slices as they
// are, anything else (numbers) as fmt prints it.
func argString(v any) string {
	switch a := v.(type) {
	case string:
		return a
	case []byte:
		return string(a)
	default:
		return fmt.Sprint(a)
	}
}
