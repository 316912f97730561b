package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ClientCounts reads connected_clients and blocked_clients from the INFO
// of the server c talks to: what a test of a server of its own counts to
// bound the connections a component holds.
func ClientCounts(t testing.TB, c *redis.Client) (connected, blocked int) {
	t.Helper()
	info, err := c.Info(context.Background(), "clients").Result()
	if err != nil {
		t.Fatalf("redistest: INFO clients: %v", err)
	}
	field := func(name string) int {
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, name+":"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("redistest: INFO clients %s: %v", name, err)
				}
				return n
			}
		}
		t.Fatalf("redistest: INFO clients has no %s: %q", name, info)
		return 0
	}
	return field("connected_clients"), field("blocked_clients")
}
