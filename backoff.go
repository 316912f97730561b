package dtq

import (
	"time"
)

// backoff returns the delay before the attempt after attempt: base·2^(attempt-1)
// capped at max, then jitter of ±jitter·delay (r in [0,1) picks where), then
// clamped to [0, max] again.
func backoff(attempt int, base, ceiling time.Duration, jitter, r float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	d = time.Duration(float64(d) * (1 + jitter*(2*r-1)))
	return min(max(d, 0), ceiling)
}
