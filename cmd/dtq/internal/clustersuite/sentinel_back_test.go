package clustersuite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/internal/redistest"
)

// TestSentinelFailoverBack is the second failover that once lost every
// task: the master is killed, its replica promoted, the old master started
// again at once and, before it has caught up, forced back to master
// (SENTINEL FAILOVER) while the new master stalls. With the append-only
// file on every node and DTQ_REPLICA_ACKS=1 no acknowledged task is lost;
// a node restarted without its data would be promoted empty and wipe the
// other.
func TestSentinelFailoverBack(t *testing.T) {
	t.Parallel()
	nodeArgs := []string{"--appendonly", "yes", "--appendfsync", "everysec"}
	if os.Getenv("DTQ_TEST_SENTINEL_NO_AOF") == "1" { // shows the loss the persistence prevents
		nodeArgs = []string{"--appendonly", "no"}
	}
	st, err := redistest.StartSentinelsWith(1, 3, nodeArgs)
	require.NoError(t, err)
	t.Cleanup(st.Stop)
	rc, err := config.NewRedisClient(st.URL())
	require.NoError(t, err)
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	a := startAPI(t, rc, "fb", replicaAcks(1))
	l := &load{a: a, acked: map[string]string{}}
	submit := func(from, to int) {
		for i := from; i < to; i++ {
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			require.NoError(t, l.submit(sctx, []string{"b0", "b1"}[i%2], fmt.Sprintf("k%d", i)))
			cancel()
		}
	}
	submit(0, 200)

	victim, err := st.CurrentMaster(ctx)
	require.NoError(t, err)
	victim.Kill()
	var promoted *redistest.Server
	require.Eventually(t, func() bool {
		m, err := st.AgreedMaster(ctx)
		promoted = m
		return err == nil && m != victim
	}, 60*time.Second, 50*time.Millisecond, "no replica was promoted")
	require.NoError(t, victim.Restart()) // at once, with its data directory

	// Forced back while the new master stalls: the restarted node may not
	// have synced from it yet. Sentinel refuses until it sees the node as
	// a replica again.
	sc := redis.NewSentinelClient(&redis.Options{Addr: st.Sentinels[0].Addr})
	t.Cleanup(func() { sc.Close() })
	require.Eventually(t, func() bool {
		err := sc.Failover(ctx, st.Name).Err()
		if err != nil && !strings.Contains(err.Error(), "NOGOODSLAVE") && !strings.Contains(err.Error(), "INPROG") {
			t.Logf("SENTINEL FAILOVER: %v", err)
		}
		return err == nil
	}, 60*time.Second, 20*time.Millisecond, "SENTINEL FAILOVER was never accepted")
	pc := redis.NewClient(&redis.Options{Addr: promoted.Addr})
	t.Cleanup(func() { pc.Close() })
	_ = pc.Do(ctx, "DEBUG", "SLEEP", "3").Err() // the stall; its answer does not matter
	require.Eventually(t, func() bool {
		m, err := st.AgreedMaster(ctx)
		return err == nil && m == victim
	}, 60*time.Second, 50*time.Millisecond, "the old master was not promoted back")
	submit(200, 300)

	lost, unread := 0, 0
	var readErr error
	require.Eventually(t, func() bool {
		lost, unread = 0, 0
		for _, id := range l.acked {
			_, err := a.insp.GetTask(ctx, id)
			switch {
			case errors.Is(err, dtq.ErrTaskNotFound):
				lost++
			case err != nil:
				unread++
				readErr = err
			}
		}
		return unread == 0
	}, 60*time.Second, 200*time.Millisecond, "acknowledged tasks could not be read: %v", readErr)
	line := fmt.Sprintf("FAILOVER BACK sentinel replica_acks=1: acknowledged=%d lost=%d", len(l.acked), lost)
	fmt.Println(line)
	t.Log(line)
	require.Zero(t, lost, "acknowledged tasks lost in the failover back")
}
