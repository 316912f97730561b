package redistest

import (
	"context"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

// MaxArgs is the most arguments (the command's name included) dtq sends
// in one command, rdb.MaxCallArgs (this package cannot import rdb, whose
// tests use it; an rdb test checks the two agree): some proxies in front of
// managed Redis refuse more (docs/compatibility.md). Every client this
// package hands out fails its test on a longer command, before sending it.
const MaxArgs = 3999

// argLimit is the go-redis hook that enforces MaxArgs.
type argLimit struct{ tb testing.TB }

// DialHook implements redis.Hook.
func (argLimit) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (h argLimit) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.check(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h argLimit) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.check(cmd)
		}
		return next(ctx, cmds)
	}
}

func (h argLimit) check(cmd redis.Cmder) {
	if n := len(cmd.Args()); n > MaxArgs {
		h.tb.Errorf("redistest: %s sent with %d arguments, more than %d", cmd.Name(), n, MaxArgs)
	}
}
