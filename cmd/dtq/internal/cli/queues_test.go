package cli

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

func TestQueues(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	for range 3 {
		b.submit(t, dtq.Submission{Queue: "images", Type: "echo", Priority: new(7)})
	}
	b.submit(t, dtq.Submission{Queue: "images", Type: "echo", Delay: time.Hour})
	b.submit(t, dtq.Submission{Queue: "archive", Type: "echo"})

	require.Equal(t, "queue images paused\n", b.ok(t, "queues", "pause", "images"))
	require.Equal(t, "queue images was already paused\n", b.ok(t, "queues", "pause", "images"))
	golden(t, "queues_list", b.ok(t, "queues", "list"))
	golden(t, "queues_stats", b.ok(t, "queues", "stats", "images"))

	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "queues", "list", "-o", "json")), &items))
	require.Len(t, items, 2)
	var q map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "queues", "stats", "images", "-o", "json")), &q))
	require.Equal(t, "images", q["queue"])
	require.Equal(t, true, q["paused"])
	require.Equal(t, 4.0, q["depth"])

	var resumed map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "queues", "resume", "images", "-o", "json")), &resumed))
	require.Equal(t, map[string]any{"queue": "images", "paused": false, "changed": true}, resumed)
	require.Equal(t, "queue images was already running\n", b.ok(t, "queues", "resume", "images"))

	code, stdout, stderr := b.run(t, "queues", "stats", "nowhere")
	requireAPIError(t, code, stdout, stderr, "QUEUE_NOT_FOUND")
	code, stdout, stderr = b.run(t, "queues", "pause", "Not_Valid")
	requireAPIError(t, code, stdout, stderr, "INVALID_REQUEST")

	// Purge refuses without --yes and touches nothing.
	code, stdout, stderr = b.run(t, "queues", "purge", "images")
	require.Equal(t, 2, code)
	require.Empty(t, stdout)
	require.Equal(t, "dtq: refusing to cancel every ready task of queue images without --yes\n", stderr)
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "queues", "stats", "images", "-o", "json")), &q))
	require.Equal(t, 3.0, q["ready_total"])

	require.Equal(t, "cancelled 3 ready tasks of queue images\n", b.ok(t, "queues", "purge", "images", "--yes"))
	var purged map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "queues", "purge", "images", "--yes", "-o", "json")), &purged))
	require.Equal(t, map[string]any{"queue": "images", "cancelled": 0.0}, purged)

	// Recount repairs a depth counter edited by hand.
	require.Equal(t, "queue images depth 1 (unchanged)\n", b.ok(t, "queues", "recount", "images"))
	require.NoError(t, b.rc.IncrBy(b.ctx, rdb.NewKeys(b.prefix).Depth("images"), 5).Err())
	require.Equal(t, "queue images depth 6 -> 1\n", b.ok(t, "queues", "recount", "images"))

	tasks, err := b.insp.ListTasks(b.ctx, &dtq.TaskListParams{Queue: "images", Status: dtqtype.StatusCancelled})
	require.NoError(t, err)
	require.Len(t, tasks.Items, 3)
}

func TestQueuesCreateDelete(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	require.Equal(t, "created queue billing\n", b.ok(t, "queues", "create", "billing"))
	require.Equal(t, "queue billing already existed\n", b.ok(t, "queues", "create", "billing"))
	var created map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "queues", "create", "invoices", "-o", "json")), &created))
	require.Equal(t, map[string]any{"queue": "invoices", "created": true, "partitions": float64(1)}, created)
	require.Equal(t, "created queue hot (4 partitions)\n", b.ok(t, "queues", "create", "hot", "--partitions", "4"))
	for range 4 {
		b.submit(t, dtq.Submission{Queue: "hot", Type: "echo"})
	}
	stats := b.ok(t, "queues", "stats", "hot")
	require.Contains(t, stats, "partitions")
	require.Regexp(t, `(?m)^  partition 3:\s+depth 1, ready 1, running 0, scheduled 0, dlq 0$`, stats)
	require.Equal(t, "queue hot already existed (4 partitions)\n", b.ok(t, "queues", "create", "hot"))
	code, stdout, stderr := b.run(t, "queues", "create", "hot", "--partitions", "2")
	requireAPIError(t, code, stdout, stderr, "PARTITIONS_CONFLICT")
	require.Equal(t, []string{"billing", "hot", "invoices"}, b.queueNames(t))

	code, stdout, stderr = b.run(t, "queues", "create", "Not_Valid")
	requireAPIError(t, code, stdout, stderr, "INVALID_REQUEST")

	// Delete needs --yes and touches nothing without it.
	code, stdout, stderr = b.run(t, "queues", "delete", "billing")
	require.Equal(t, 2, code)
	require.Empty(t, stdout)
	require.Equal(t, "dtq: refusing to delete queue billing without --yes\n", stderr)
	require.Equal(t, []string{"billing", "hot", "invoices"}, b.queueNames(t))
	_, err := b.admin.PurgeQueue(b.ctx, "hot")
	require.NoError(t, err)
	require.Equal(t, "deleted queue hot\n", b.ok(t, "queues", "delete", "hot", "--yes"), "a partitioned queue goes with its partitions")
	require.Equal(t, []string{"billing", "invoices"}, b.queueNames(t))

	// A queue holding a task is refused; an empty one goes.
	b.submit(t, dtq.Submission{Queue: "invoices", Type: "echo"})
	code, stdout, stderr = b.run(t, "queues", "delete", "invoices", "--yes")
	requireAPIError(t, code, stdout, stderr, "QUEUE_NOT_EMPTY")
	require.Equal(t, "deleted queue billing\n", b.ok(t, "queues", "delete", "billing", "--yes"))
	require.Equal(t, []string{"invoices"}, b.queueNames(t))
	code, stdout, stderr = b.run(t, "queues", "delete", "billing", "--yes")
	requireAPIError(t, code, stdout, stderr, "QUEUE_NOT_FOUND")

	b.ok(t, "queues", "create", "spare")
	var deleted map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "queues", "delete", "spare", "--yes", "-o", "json")), &deleted))
	require.Equal(t, map[string]any{"queue": "spare", "deleted": true}, deleted)
}

// TestQueuesListFollowsPages lists more queues than one API page holds.
func TestQueuesListFollowsPages(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	const n = 1005
	for i := range n {
		_, err := b.admin.CreateQueue(b.ctx, fmt.Sprintf("q%04d", i), nil)
		require.NoError(t, err)
	}
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "queues", "list", "-o", "json")), &items))
	require.Len(t, items, n)
	require.Equal(t, "q0000", items[0]["queue"])
	require.Equal(t, "q1004", items[n-1]["queue"])
}

func TestQueuesLimits(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	require.Equal(t, "queue emails: no limits\n", b.ok(t, "queues", "limits", "get", "emails"))
	require.Equal(t, "queue emails: rate 10/1s (burst 3), concurrency 5\n",
		b.ok(t, "queues", "limits", "set", "emails", "--rate", "10/1s", "--burst", "3", "--concurrency", "5"))
	require.Equal(t, "queue emails: rate 10/1s (burst 3), concurrency 5\n", b.ok(t, "queues", "limits", "get", "emails"))
	require.Equal(t, "queue emails: key_concurrency 1\n", b.ok(t, "queues", "limits", "set", "emails", "--key-concurrency", "1"))
	require.Equal(t, "queue emails: fairness (default weight 1, acme 5, zed 2), key_rate 2/1s (burst 3), key_order fifo\n",
		b.ok(t, "queues", "limits", "set", "emails", "--weight", "acme=5", "--weight", "zed=2", "--key-rate", "2/1s",
			"--key-burst", "3", "--key-order", "fifo"))
	require.Equal(t, "queue emails: fairness (default weight 1, acme 5, zed 2), key_rate 2/1s (burst 3), key_order fifo\n",
		b.ok(t, "queues", "limits", "get", "emails"))
	require.Equal(t, "queue emails: fairness (default weight 1)\n", b.ok(t, "queues", "limits", "set", "emails", "--fair"))
	require.Equal(t, "queue emails: concurrency 2, events outcomes\n",
		b.ok(t, "queues", "limits", "set", "emails", "--concurrency", "2", "--events", "outcomes"))
	require.Equal(t, "queue emails: events outcomes\n", b.ok(t, "queues", "limits", "set", "emails", "--events", "outcomes"))
	require.Equal(t, "queue emails: events outcomes\n", b.ok(t, "queues", "limits", "get", "emails"))
	code, _, stderr := b.run(t, "queues", "limits", "set", "emails", "--events", "some")
	require.NotZero(t, code)
	require.Contains(t, stderr, "events")
	require.Equal(t, "queue emails: no limits\n", b.ok(t, "queues", "limits", "set", "emails", "--events", "full"))
	require.Equal(t, "queue emails: no limits\n", b.ok(t, "queues", "limits", "delete", "emails"))
	require.Equal(t, "queue emails: no limits\n", b.ok(t, "queues", "limits", "get", "emails"))
}

// queueNames lists the registered queues, by name.
func (b *apiBundle) queueNames(t *testing.T) []string {
	t.Helper()
	res, err := b.insp.ListQueues(b.ctx, nil)
	require.NoError(t, err)
	names := []string{}
	for _, q := range res.Items {
		names = append(names, q.Name)
	}
	return names
}
