package rdb

import (
	"context"
	"fmt"
	"strings"
)

// Ready checks that Redis answers, that it is at least MinRedisVersion,
// that every script is loaded (loading them when a restart emptied the
// cache) and that maxmemory-policy is noeviction, since an evicted task is
// silent data loss.
func (r *RDB) Ready(ctx context.Context) error {
	if err := r.c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis unreachable: %w", err)
	}
	if _, err := r.CheckVersion(ctx); err != nil {
		return err
	}
	ok, err := r.ScriptsLoaded(ctx)
	if err != nil {
		return fmt.Errorf("script check: %w", err)
	}
	if !ok {
		if err := r.LoadScripts(ctx); err != nil {
			return err
		}
	}
	policy, err := r.c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		// Some managed Redis services refuse CONFIG; fall back to INFO.
		info, ierr := r.c.Info(ctx, "memory").Result()
		if ierr != nil {
			return nil // cannot tell: do not fail readiness on a missing command
		}
		for _, line := range strings.Split(info, "\n") {
			if v, found := strings.CutPrefix(strings.TrimSpace(line), "maxmemory_policy:"); found {
				policy = map[string]string{"maxmemory-policy": v}
			}
		}
	}
	if p, found := policy["maxmemory-policy"]; found && p != "noeviction" {
		return fmt.Errorf("redis maxmemory-policy is %q; dtq needs noeviction (an evicted task is lost silently)", p)
	}
	return nil
}
