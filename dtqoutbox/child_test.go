package dtqoutbox

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/redistest"
)

// The relay child: the test binary started again with childEnv set runs a
// relay (childMain) that may SIGKILL itself at one point of a pass.
const (
	childEnv    = "DTQ_OUTBOX_TEST_CHILD"
	childPG     = "DTQ_OUTBOX_TEST_PG"
	childRedis  = "DTQ_OUTBOX_TEST_REDIS"
	childPrefix = "DTQ_OUTBOX_TEST_PREFIX"
	childCrash  = "DTQ_OUTBOX_TEST_CRASH" // taken | submitted | recorded | "" (never)
)

// childMain runs a relay until SIGTERM, killing itself with SIGKILL at
// the point named by childCrash in about one pass of three.
func childMain() int {
	db, err := sql.Open("pgx", os.Getenv(childPG))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv(childRedis)})
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: os.Getenv(childPrefix)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := d.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	r, err := NewRelay(&RelayConfig{DB: db, Client: c, BatchSize: 8, PollInterval: 20 * time.Millisecond,
		Lease: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	crash := os.Getenv(childCrash)
	r.hook = func(point string) {
		if point == crash && rand.IntN(3) == 0 {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestRelayKilled: relays killed with SIGKILL over and over, at each point
// of a pass (rows taken and not submitted; submitted and not recorded;
// recorded) and at random moments, while rows are committed and rolled
// back: every committed row still becomes exactly one task, and no
// rolled-back row does.
func TestRelayKilled(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	srv := redistest.Shared(t).Addr
	committed := map[int]bool{}
	producing := make(chan struct{})
	marks := make(chan map[int]bool, 1)
	insertErr := make(chan error, 1)
	go func() {
		defer close(producing)
		local := map[int]bool{}
		defer func() { marks <- local }()
		for i := range 400 {
			local[i] = rand.IntN(5) != 0
			if err := g.insertQuiet(i, local[i]); err != nil {
				insertErr <- err
				return
			}
			if i%20 == 0 {
				time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond) // rows arrive over a few seconds
			}
		}
	}()
	kills := map[string]int{}
	points := []string{"taken", "submitted", "recorded", "random"}
	for round := 0; ; round++ {
		select {
		case <-producing:
		default:
		}
		point := points[round%len(points)]
		crash := point
		if point == "random" {
			crash = ""
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", childPG+"="+g.db.url, childRedis+"="+srv, childPrefix+"="+g.prefix, childCrash+"="+crash)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			require.Error(t, err, "the relay child only ends killed")
			kills[point]++
		case <-time.After(time.Duration(50+rand.IntN(250)) * time.Millisecond):
			_ = cmd.Process.Kill()
			require.Error(t, <-exited, "killed")
			kills["random"]++
		}
		if isClosed(producing) && round >= 10*len(points) {
			break
		}
	}
	for m, c := range <-marks {
		committed[m] = c
	}
	select {
	case err := <-insertErr:
		t.Fatal(err)
	default:
	}
	g.relay(t, nil) // one that lives: it finishes what the killed ones left
	g.settled(t)
	g.exact(t, committed)
	n := 0
	for _, c := range committed {
		if c {
			n++
		}
	}
	t.Logf("OUTBOX kill-9 rows=%d committed=%d tasks=%d (exactly one each) kills: taken=%d submitted=%d recorded=%d random=%d",
		len(committed), n, n, kills["taken"], kills["submitted"], kills["recorded"], kills["random"])
	require.Positive(t, kills["taken"]+kills["submitted"]+kills["recorded"], "the children killed themselves at pass points")
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
