package redistest

import (
	"context"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Counter counts the commands sent through a client by name and key
// (pipelined ones included), for tests that bound what an operation reads.
// Safe for concurrent use.
type Counter struct {
	mu sync.Mutex
	n  map[[2]string]int
}

// Count returns how many commands name (lower case, like "hgetall") were
// sent with key as their first argument.
func (c *Counter) Count(name, key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[[2]string{name, key}]
}

func (c *Counter) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		key := ""
		if args := cmd.Args(); len(args) > 1 {
			key, _ = args[1].(string)
		}
		c.n[[2]string{cmd.Name(), key}]++
	}
}

// DialHook dials as the client would.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts one command.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts each command of a pipeline.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*Counter)(nil)

// Counted returns a copy of s whose client, a new one of the same server,
// counts the commands it sends into the returned Counter. The client is
// closed at t's cleanup, like Server.Client's.
func (s *Setup) Counted(t testing.TB) (*Setup, *Counter) {
	t.Helper()
	c := s.Server.Client(t)
	n := &Counter{n: map[[2]string]int{}}
	c.AddHook(n)
	return &Setup{Server: s.Server, Client: c, Prefix: s.Prefix}, n
}
