package dtq_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/faultproxy"
)

// TestHandlerCancelledWhenRenewalsStop: a worker that cannot renew its
// lease, whether Redis refuses it (connections reset) or never answers
// (replies held back past the read timeout), cancels its handler with ErrLeaseLost before the
// lease can run out, while Redis is still unreachable: by then another
// worker may take the task over (docs/reliability.md).
func TestHandlerCancelledWhenRenewalsStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(p *faultproxy.Proxy)
		heal  func(p *faultproxy.Proxy)
	}{
		{"refused", func(p *faultproxy.Proxy) { p.SetDown(true) }, func(p *faultproxy.Proxy) { p.SetDown(false) }},
		{"no answer", func(p *faultproxy.Proxy) { p.SetLatency(5 * time.Second) }, func(p *faultproxy.Proxy) { p.SetLatency(0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			proxy, err := faultproxy.Start(b.rc.Options().Addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = proxy.Close() })
			rc := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1, ReadTimeout: 500 * time.Millisecond})
			t.Cleanup(func() { _ = rc.Close() })
			w, err := openPrefix(t, rc, b.prefix).NewWorker(&dtq.WorkerConfig{Queues: map[string]int{"lease": 1},
				Concurrency: 1, WorkerID: "cut", VisibilityTimeout: 3 * time.Second, HeartbeatInterval: time.Second,
				DrainTimeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			started, cause := make(chan struct{}), make(chan error, 1)
			w.HandleFunc("job", func(ctx context.Context, _ *dtq.Task) (any, error) {
				close(started)
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return nil, context.Cause(ctx)
			})
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			t.Cleanup(func() {
				tc.heal(proxy)
				stop()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			_, err = b.client.Submit(b.ctx, dtq.Submission{Type: "job", Queue: "lease", Timeout: time.Hour})
			require.NoError(t, err)
			<-started
			tc.fault(proxy)
			select {
			case err := <-cause:
				require.ErrorIs(t, err, dtq.ErrLeaseLost)
			case <-time.After(time.Minute):
				t.Fatal("the handler ran on after its lease ran out unrenewed")
			}
		})
	}
}
