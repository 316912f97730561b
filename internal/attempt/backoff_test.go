package attempt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoffSchedule(t *testing.T) {
	t.Parallel()
	const s = time.Second
	want := []time.Duration{1 * s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 60 * s, 60 * s, 60 * s, 60 * s}
	for i, w := range want {
		attempt := i + 1
		require.Equal(t, w, Backoff(attempt, time.Second, time.Minute, 0, 0.5), "attempt %d", attempt)
		// No jitter means r does not matter.
		require.Equal(t, w, Backoff(attempt, time.Second, time.Minute, 0, 0.999), "attempt %d", attempt)
	}
}

func TestBackoffClamps(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		attempt       int
		base, ceiling time.Duration
		jitter, r     float64
		want          time.Duration
	}{
		{"attempt zero is base", 0, time.Second, time.Minute, 0, 0.5, time.Second},
		{"negative attempt is base", -3, time.Second, time.Minute, 0, 0.5, time.Second},
		{"base above max is max", 1, 5 * time.Second, 3 * time.Second, 0, 0.5, 3 * time.Second},
		{"base equal to max", 4, time.Minute, time.Minute, 0, 0.5, time.Minute},
		{"huge attempt stays at max", 1000, time.Second, time.Minute, 0, 0.5, time.Minute},
		{"huge attempt, max near the duration limit", 1000, time.Second, 100 * 365 * 24 * time.Hour, 0, 0.5, 100 * 365 * 24 * time.Hour},
		{"jitter never exceeds max", 10, time.Second, time.Minute, 0.2, 0.999, time.Minute},
		{"jitter below max at the cap", 10, time.Second, time.Minute, 0.2, 0, 48 * time.Second},
		{"full jitter can reach zero", 1, time.Second, time.Minute, 1, 0, 0},
		{"zero base", 5, 0, time.Minute, 0.2, 0.999, 0},
	}
	for _, c := range cases {
		require.Equal(t, c.want, Backoff(c.attempt, c.base, c.ceiling, c.jitter, c.r), c.name)
	}
}

func TestBackoffJitterBounds(t *testing.T) {
	t.Parallel()
	const base, ceiling, jitter = 100 * time.Millisecond, 30 * time.Second, 0.2
	for attempt := 1; attempt <= 10; attempt++ {
		plain := Backoff(attempt, base, ceiling, 0, 0)
		lo := time.Duration(float64(plain) * (1 - jitter))
		hi := min(time.Duration(float64(plain)*(1+jitter)), ceiling)
		cases := []struct {
			r    float64
			want time.Duration // expected value, to within rounding
		}{
			{0, lo},
			{0.5, plain},
			{0.999, min(time.Duration(float64(plain)*(1+jitter*0.998)), ceiling)},
		}
		for _, c := range cases {
			got := Backoff(attempt, base, ceiling, jitter, c.r)
			require.InDelta(t, float64(c.want), float64(got), float64(time.Microsecond), "attempt %d r %v", attempt, c.r)
			require.GreaterOrEqual(t, got, lo-time.Microsecond, "attempt %d r %v", attempt, c.r)
			require.LessOrEqual(t, got, hi, "attempt %d r %v", attempt, c.r)
			require.LessOrEqual(t, got, ceiling)
		}
	}
}
