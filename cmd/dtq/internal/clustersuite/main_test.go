package clustersuite_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // failovers make go-redis log dial errors
	os.Exit(redistest.Main(m, redistest.After(stopSharedCluster)))
}

func stopSharedCluster() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
}

var (
	shared   *redistest.Cluster
	sharedMu sync.Mutex
)

// runs numbers the runs of tests on the shared cluster.
var runs atomic.Int64

// runPrefix is a key prefix for one run of a test on the shared cluster:
// with -count above 1 the tests run again on the cluster of the first
// run, which still holds that run's keys.
func runPrefix(name string) string { return fmt.Sprintf("%s%d", name, runs.Add(1)) }

// sharedCluster is a 3-master cluster (no replicas) shared by the tests
// that do not kill nodes; each test uses its own key prefix.
func sharedCluster(t *testing.T) *redistest.Cluster {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		c, err := redistest.StartCluster(3, 0)
		if err != nil {
			t.Fatal(err)
		}
		shared = c
	}
	return shared
}

// queuesOnEveryMaster returns one queue name per master of c, each queue's
// keys ({queue} hash tag) served by a different master.
func queuesOnEveryMaster(t *testing.T, c *redistest.Cluster, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	keys := rdb.NewKeys(prefix)
	byMaster := map[string]string{}
	for i := 0; len(byMaster) < 3 && i < 1000; i++ {
		q := fmt.Sprintf("q%d", i)
		m, err := c.MasterOf(ctx, keys.Depth(q))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byMaster[m.Addr]; !ok {
			byMaster[m.Addr] = q
		}
	}
	if len(byMaster) < 3 {
		t.Fatalf("found queues on %d masters only", len(byMaster))
	}
	var out []string
	for _, q := range byMaster {
		out = append(out, q)
	}
	return out
}
