package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// MinRedisVersion is the oldest Redis dtq runs on: it needs XAUTOCLAIM's
// deleted-ids reply, SPUBLISH and script flags of 7.0.
const MinRedisVersion = "7.0"

// ErrRedisTooOld is wrapped by CheckVersion's error for a Redis before 7.0.
var ErrRedisTooOld = fmt.Errorf("redis is older than %s", MinRedisVersion)

// CheckVersion reads the server's version (INFO server) and fails with
// ErrRedisTooOld below MinRedisVersion. It returns the version found; a
// server that does not report one (some managed services hide INFO) passes
// with version "".
func (r *RDB) CheckVersion(ctx context.Context) (string, error) {
	info, err := readInfo(ctx, r.c, "server")
	if err != nil {
		return "", err
	}
	v := infoField(info, "redis_version")
	if v == "" {
		return "", nil
	}
	if !versionAtLeast(v, 7, 0) {
		return v, fmt.Errorf("%w: found %s", ErrRedisTooOld, v)
	}
	return v, nil
}

// readInfo reads one INFO section. A server that refuses it or does not
// know the section (some managed services, the in-process dev Redis)
// answers "" and no error: callers cannot tell, so they do not fail.
func readInfo(ctx context.Context, c redis.Cmdable, section string) (string, error) {
	info, err := c.Info(ctx, section).Result()
	if _, ok := errors.AsType[redis.Error](err); ok {
		return "", nil
	}
	return info, err
}

// infoField returns the value of field in an INFO reply, or "".
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// versionAtLeast reports whether a dotted version is at least major.minor;
// an unparsable one passes (a fork with its own numbering).
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	ma, err := strconv.Atoi(parts[0])
	if err != nil {
		return true
	}
	mi := 0
	if len(parts) > 1 {
		if n, err := strconv.Atoi(parts[1]); err == nil {
			mi = n
		}
	}
	return ma > major || ma == major && mi >= minor
}
