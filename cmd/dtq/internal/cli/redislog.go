package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// go-redis has one process-wide logger of its own, which prints plain
// lines to stderr ("redis: 2026/12/01 … pool.go:770: …"), even when dtq
// logs JSON. The dtq binary routes it through the server's slog logger
// instead: Execute installs redisLogger once, and each server command
// points it at its logger. In-process tests leave go-redis's logger alone.

// redisLogTarget is the logger go-redis's lines go to; nil until a server
// command has made its logger.
var redisLogTarget atomic.Pointer[slog.Logger]

var installRedisLogger = sync.OnceFunc(func() { redis.SetLogger(redisLogger{target: &redisLogTarget}) })

// redisLogger adapts go-redis's Printf logging to slog: each line becomes
// one WARN record (go-redis logs only trouble: failed dials, pool errors).
type redisLogger struct {
	target *atomic.Pointer[slog.Logger]
}

// Printf implements go-redis's internal.Logging.
func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	l := r.target.Load()
	if l == nil {
		l = slog.Default()
	}
	l.WarnContext(ctx, msg, "component", "go-redis")
}
