package rdb

import (
	"context"
	"fmt"
)

// Readiness checks, named in ReadyError.Check.
const (
	CheckRedis           = "redis"            // Redis answers PING
	CheckScripts         = "scripts"          // every script is in the script cache
	CheckMaxmemoryPolicy = "maxmemory_policy" // maxmemory-policy is noeviction
	CheckRedisVersion    = "redis_version"    // Redis is at least MinRedisVersion
)

// ReadyError is a failed readiness check: Check names it, Err is the cause,
// which may name the Redis address and so is only for the server's log.
type ReadyError struct {
	Check  string
	Detail string // safe to show anyone, e.g. the Redis version found; may be ""
	Err    error
}

// Error says which check failed and why.
func (e *ReadyError) Error() string { return e.Check + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *ReadyError) Unwrap() error { return e.Err }

// Ready checks that Redis answers, that it is at least MinRedisVersion,
// that every script is loaded (loading them when a restart emptied the
// cache) and that maxmemory-policy is
// noeviction, since an evicted task is silent data loss. A failure is a
// *ReadyError.
func (r *RDB) Ready(ctx context.Context) error {
	_, err := r.ReadyChecks(ctx)
	return err
}

// ReadyChecks is Ready, and also names the checks it could not make
// (CheckRedisVersion, CheckMaxmemoryPolicy) because the server refuses or
// hides what they read, as managed services do with INFO and CONFIG: those
// are not held against it.
func (r *RDB) ReadyChecks(ctx context.Context) (unknown []string, err error) {
	if err := r.c.Ping(ctx).Err(); err != nil {
		return nil, &ReadyError{Check: CheckRedis, Err: fmt.Errorf("redis unreachable: %w", err)}
	}
	v, err := r.CheckVersion(ctx)
	if err != nil {
		re := &ReadyError{Check: CheckRedisVersion, Err: err}
		if v == "" {
			re.Check = CheckRedis // INFO itself failed
		} else {
			re.Detail = "found Redis " + v
		}
		return nil, re
	}
	if v == "" {
		unknown = append(unknown, CheckRedisVersion)
	}
	ok, err := r.ScriptsLoaded(ctx)
	if err != nil {
		return unknown, &ReadyError{Check: CheckScripts, Err: fmt.Errorf("script check: %w", err)}
	}
	if !ok {
		if err := r.LoadScripts(ctx); err != nil {
			return unknown, &ReadyError{Check: CheckScripts, Err: err}
		}
	}
	policy, err := r.c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		// Some managed Redis services refuse CONFIG; fall back to INFO.
		policy = nil
		if info, ierr := r.c.Info(ctx, "memory").Result(); ierr == nil {
			if v := infoField(info, "maxmemory_policy"); v != "" {
				policy = map[string]string{"maxmemory-policy": v}
			}
		}
	}
	p, found := policy["maxmemory-policy"]
	switch {
	case !found:
		unknown = append(unknown, CheckMaxmemoryPolicy)
	case p != "noeviction":
		return unknown, &ReadyError{Check: CheckMaxmemoryPolicy,
			Err: fmt.Errorf("redis maxmemory-policy is %q; dtq needs noeviction (an evicted task is lost silently)", p)}
	}
	return unknown, nil
}
