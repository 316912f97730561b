package dtq

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
)

// never is a quietFor of a queue that never did anything.
const never = time.Duration(math.MaxInt64)

func TestScalingDesired(t *testing.T) {
	t.Parallel()
	base := scalingInput{concurrency: 4, drain: time.Minute, idle: 5 * time.Minute, quietFor: never}
	with := func(f func(*scalingInput)) scalingInput { in := base; f(&in); return in }
	for _, tc := range []struct {
		name string
		in   scalingInput
		want int64
	}{
		{"nothing ever", base, 0},
		{"arrivals alone: 200/s × 0.1s / 4 is exactly 5",
			with(func(in *scalingInput) { in.arrivalRate, in.serviceMS = 200, 100 }), 5},
		{"a little more rounds up", with(func(in *scalingInput) { in.arrivalRate, in.serviceMS = 201, 100 }), 6},
		{"50/s", with(func(in *scalingInput) { in.arrivalRate, in.serviceMS = 50, 100 }), 2},
		{"backlog drains within drain: 2400 × 0.1s / 60s / 4",
			with(func(in *scalingInput) { in.ready, in.serviceMS = 2400, 100 }), 1},
		{"backlog and arrivals add",
			with(func(in *scalingInput) { in.ready, in.arrivalRate, in.serviceMS = 24000, 200, 100 }), 15},
		{"a shorter drain wants more",
			with(func(in *scalingInput) { in.ready, in.serviceMS, in.drain = 24000, 100, 10*time.Second }), 60},
		{"ready without a known service time still wants one",
			with(func(in *scalingInput) { in.ready = 1000 }), 1},
		{"held only", with(func(in *scalingInput) { in.held = 3 }), 1},
		{"running only", with(func(in *scalingInput) { in.running = 1 }), 1},
		{"due within a minute only", with(func(in *scalingInput) { in.dueSoon = 1 }), 1},
		{"arrivals too few to round up", with(func(in *scalingInput) { in.arrivalRate, in.serviceMS = 0.01, 1 }), 1},
		{"quiet for less than idle", with(func(in *scalingInput) { in.quietFor = 4 * time.Minute }), 1},
		{"quiet for exactly idle", with(func(in *scalingInput) { in.quietFor = 5 * time.Minute }), 0},
		{"idle 0 lets an empty queue go at once", with(func(in *scalingInput) { in.quietFor, in.idle = 0, 0 }), 0},
		{"concurrency divides", with(func(in *scalingInput) { in.arrivalRate, in.serviceMS, in.concurrency = 200, 100, 1 }), 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.in.desired())
		})
	}
}

func TestScalingOptionsResolve(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opt   ScalingOptions
		field string // "" = valid
		want  ScalingOptions
	}{
		{"defaults", ScalingOptions{}, "", ScalingOptions{Drain: time.Minute, Idle: 5 * time.Minute, Concurrency: 16}},
		{"no idle", ScalingOptions{Idle: NoScalingIdle}, "", ScalingOptions{Drain: time.Minute, Concurrency: 16}},
		{"bounds", ScalingOptions{Drain: 24 * time.Hour, Idle: time.Hour, Concurrency: 10000}, "",
			ScalingOptions{Drain: 24 * time.Hour, Idle: time.Hour, Concurrency: 10000}},
		{"drain too short", ScalingOptions{Drain: time.Millisecond}, "drain", ScalingOptions{}},
		{"drain too long", ScalingOptions{Drain: 25 * time.Hour}, "drain", ScalingOptions{}},
		{"idle negative", ScalingOptions{Idle: -2}, "idle", ScalingOptions{}},
		{"idle too long", ScalingOptions{Idle: 2 * time.Hour}, "idle", ScalingOptions{}},
		{"concurrency negative", ScalingOptions{Concurrency: -1}, "concurrency", ScalingOptions{}},
		{"concurrency too high", ScalingOptions{Concurrency: 10001}, "concurrency", ScalingOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.opt.resolve()
			if tc.field != "" {
				var ve *ValidationError
				require.ErrorAs(t, err, &ve)
				require.Equal(t, tc.field, ve.Field)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestScalingInputOf(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 30, 0, time.UTC)
	o := ScalingOptions{Drain: time.Minute, Idle: 5 * time.Minute}
	for _, tc := range []struct {
		name  string
		s     rdb.ScalingSample
		check func(t *testing.T, in scalingInput)
	}{
		{"a paused queue's ready tasks are held", rdb.ScalingSample{Ready: 7, Held: 2, Paused: true, LastActive: -1},
			func(t *testing.T, in scalingInput) {
				require.Zero(t, in.ready)
				require.EqualValues(t, 9, in.held)
				require.EqualValues(t, 1, in.desired())
			}},
		{"service time is the mean of the runs", rdb.ScalingSample{RunMSSum: 1000, Runs: 8, LastActive: -1},
			func(t *testing.T, in scalingInput) { require.InDelta(t, 125, in.serviceMS, 1e-9) }},
		{"the oldest ready task's age", rdb.ScalingSample{OldestReady: now.Add(-1500 * time.Millisecond), LastActive: -1},
			func(t *testing.T, in scalingInput) { require.EqualValues(t, 1500, in.oldestReadyMS) }},
		{"arrivals in the slot filling now: active", rdb.ScalingSample{Arrivals: [rdb.ArrivalSlots]int64{1}, LastActive: -1},
			func(t *testing.T, in scalingInput) {
				require.Zero(t, in.quietFor)
				require.Zero(t, in.arrivalRate, "the slot filling now is not in the rate")
				require.EqualValues(t, 1, in.desired())
			}},
		{"active three minutes ago counts from that minute's end",
			rdb.ScalingSample{LastActive: now.Unix()/60 - 3},
			func(t *testing.T, in scalingInput) {
				require.Equal(t, 2*time.Minute+30*time.Second, in.quietFor)
				require.EqualValues(t, 1, in.desired())
			}},
		{"active six minutes ago: idle", rdb.ScalingSample{LastActive: now.Unix()/60 - 6},
			func(t *testing.T, in scalingInput) { require.Zero(t, in.desired()) }},
		{"never active: idle", rdb.ScalingSample{LastActive: -1},
			func(t *testing.T, in scalingInput) { require.Equal(t, never, in.quietFor) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.s
			s.Now = now
			tc.check(t, scalingInputOf(&s, 4, o))
		})
	}
}

func TestArrivalRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		slots [rdb.ArrivalSlots]int64
		want  float64
	}{
		{"none", [rdb.ArrivalSlots]int64{}, 0},
		{"the filling slot and those past the window are left out",
			[rdb.ArrivalSlots]int64{500, 0, 0, 0, 0, 0, 0, 900, 900}, 0},
		{"steady 200/s", [rdb.ArrivalSlots]int64{300, 1000, 1000, 1000, 1000, 1000, 1000, 7}, 200},
		{"half the window", [rdb.ArrivalSlots]int64{0, 250, 250, 250}, 25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.InDelta(t, tc.want, arrivalRate(tc.slots), 1e-9)
		})
	}
}

// TestScalingFollowsSteps drives a simulated load through arrival rates of
// 0, 200, 50 and 0 tasks a second, two minutes each, tasks taking 100ms
// and workers 4 slots, with as many workers as the signal wanted at its
// last reading (every 15s, as an autoscaler polls). The simulation
// records arrivals as the ingest script does (per five-second slot) and
// keeps the ready backlog; 30s into each step the signal must be within 1
// of the formula computed from the true arrival rate and service time.
// Steps start on a slot boundary and off it.
func TestScalingFollowsSteps(t *testing.T) {
	t.Parallel()
	const (
		tick        = 100 * time.Millisecond
		stepLen     = 2 * time.Minute
		poll        = 15 * time.Second
		service     = 100 * time.Millisecond
		concurrency = 4
	)
	rates := []float64{0, 200, 50, 0}
	for _, offset := range []time.Duration{0, 1700 * time.Millisecond, 3300 * time.Millisecond} {
		t.Run(offset.String(), func(t *testing.T) {
			t.Parallel()
			start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(offset)
			sim := &loadSim{arrivals: map[int64]int64{}, lastActive: -1}
			workers := int64(0)
			var owed float64 // fractional arrivals carried to the next tick
			for step, rate := range rates {
				for el := time.Duration(0); el < stepLen; el += tick {
					now := start.Add(time.Duration(step)*stepLen + el)
					if el%poll == 0 {
						workers = sim.desired(now)
					}
					if el == 30*time.Second {
						got := sim.desired(now)
						truth := sim.input(now)
						truth.arrivalRate, truth.serviceMS = rate, float64(service.Milliseconds())
						truth.quietFor = sim.quietFor(now)
						want := truth.desired()
						require.InDelta(t, want, got, 1, "step %d (%v/s), 30s in: signal %d, formula %d (ready %d)",
							step, rate, got, want, sim.ready)
						if rate > 0 {
							require.Positive(t, got)
						}
					}
					owed += rate * tick.Seconds()
					n := int64(owed)
					owed -= float64(n)
					sim.arrive(now, n)
					sim.serve(now, workers*concurrency*int64(tick/service), service)
				}
			}
			// The load is gone: after the idle time the signal falls to 0.
			end := start.Add(time.Duration(len(rates))*stepLen + 5*time.Minute + time.Minute)
			require.Zero(t, sim.desired(end))
		})
	}
}

// loadSim is a queue as the scaling sample sees it: arrivals per slot, the
// ready backlog, the runs' total time, the last active minute.
type loadSim struct {
	arrivals       map[int64]int64 // by slot (epoch ms / 5000)
	ready          int64
	runMS, runs    int64
	lastActive     int64
	lastActiveTime time.Time
}

func (s *loadSim) arrive(now time.Time, n int64) {
	if n == 0 {
		return
	}
	s.arrivals[now.UnixMilli()/rdb.ArrivalSlot.Milliseconds()] += n
	s.ready += n
	s.active(now)
}

// serve runs up to capacity ready tasks in one tick.
func (s *loadSim) serve(now time.Time, capacity int64, service time.Duration) {
	n := min(s.ready, capacity)
	if n == 0 {
		return
	}
	s.ready -= n
	s.runs += n
	s.runMS += n * service.Milliseconds()
	s.active(now)
}

func (s *loadSim) active(now time.Time) {
	s.lastActive, s.lastActiveTime = now.Unix()/60, now
}

func (s *loadSim) quietFor(now time.Time) time.Duration {
	if s.lastActive < 0 {
		return never
	}
	return now.Sub(s.lastActiveTime)
}

func (s *loadSim) desired(now time.Time) int64 {
	in := s.input(now)
	return in.desired()
}

// input reads the simulation as Inspector.Scaling reads Redis.
func (s *loadSim) input(now time.Time) scalingInput {
	smp := rdb.ScalingSample{Now: now, Ready: s.ready, RunMSSum: s.runMS, Runs: s.runs, LastActive: s.lastActive}
	cur := now.UnixMilli() / rdb.ArrivalSlot.Milliseconds()
	for j := range int64(rdb.ArrivalSlots) {
		smp.Arrivals[j] = s.arrivals[cur-j]
	}
	return scalingInputOf(&smp, 4, ScalingOptions{Drain: time.Minute, Idle: 5 * time.Minute})
}
