//go:build unix

package dtq_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/redistest"
)

// BenchmarkSubmit measures one producer submitting in a loop, as
// bench -scenario enqueue -producers 1 does. Its allocations per op are the
// client's own, go-redis's included; cpu-ns/op is the CPU time of this
// process (user and system, GC included, redis-server not) per submission,
// which the round trip's wait does not blur as it does ns/op.
func BenchmarkSubmit(b *testing.B) {
	s := redistest.New(b)
	c, err := openPrefix(b, s.Client, s.Prefix).NewClient(&dtq.ClientConfig{MaxQueueDepth: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	payload := map[string]string{"data": strings.Repeat("x", 88)}
	if _, err := c.Submit(ctx, dtq.Submission{Type: "warmup", Payload: payload}); err != nil {
		b.Fatal(err) // registers the queue
	}
	b.ReportAllocs()
	start := processCPU(b)
	for b.Loop() {
		if _, err := c.Submit(ctx, dtq.Submission{Type: "noop", Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
