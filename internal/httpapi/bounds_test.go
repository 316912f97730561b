package httpapi

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestManyQueuesAnswer creates 3,000 queues the way the report did (three
// batches of 1,000 queues each) and checks that the list and /metrics still
// answer, logging their size and time (docs/security.md quotes them; the
// numbers vary too much on shared machines to assert).
func TestManyQueuesAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var wg sync.WaitGroup
	for batch := range 3 {
		wg.Go(func() {
			body := `{"tasks":[`
			for i := range 1000 {
				if i > 0 {
					body += ","
				}
				body += fmt.Sprintf(`{"task_type":"echo","queue":"q%d-%04d"}`, batch, i)
			}
			res := b.do(t, http.MethodPost, "/api/v1/tasks/batch", body+"]}")
			require.Equal(t, http.StatusOK, res.status)
		})
	}
	wg.Wait()
	for _, path := range []string{"/api/v1/queues", "/metrics", "/api/v1/stats?window=2h"} {
		start := time.Now()
		res := b.do(t, http.MethodGet, path, "")
		require.Equal(t, http.StatusOK, res.status, path)
		t.Logf("GET %s with 3000 queues: %d bytes in %s", path, len(res.body), time.Since(start).Round(time.Millisecond))
	}
}
