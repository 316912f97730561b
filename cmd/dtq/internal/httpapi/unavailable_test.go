package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// redisError is an error reply as go-redis returns it.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

var _ redis.Error = redisError("")

// TestRedisStatesAreUnavailableNotInternal: the replies of a Cluster whose
// slots are moving (a failover: MOVED after go-redis's redirections ran
// out, ASK, CLUSTERDOWN, TRYAGAIN) answer 503 REDIS_UNAVAILABLE, never a
// 500 (found by the partition suite: a cancel and a read during a master's
// isolation answered 500 "MOVED 9967 …").
func TestRedisStatesAreUnavailableNotInternal(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{
		"MOVED 9967 10.110.97.6:6379", "ASK 9967 10.110.97.6:6379", "CLUSTERDOWN The cluster is down",
		"TRYAGAIN Multiple keys request during rehashing of slot", "LOADING Redis is loading the dataset in memory",
		"READONLY You can't write against a read only replica.", "MASTERDOWN Link with MASTER is down",
	} {
		err := fmt.Errorf("dtq: cancel task: %w", redisError(reply))
		e := classify(err)
		require.NotNil(t, e, reply)
		require.Equal(t, http.StatusServiceUnavailable, e.status, reply)
		require.Equal(t, codeRedisUnavailable, e.code, reply)
	}
	require.Nil(t, classify(errors.New("ERR something dtq does not expect")), "an unexpected error is still a 500")
}
