package redistest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB whose errors and cleanups the test keeps, so a
// test can run New's cleanup and see what it reports.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	errs     []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

// end runs the cleanups, last registered first, as the testing package
// does, and returns the errors reported.
func (r *recorder) end() []string {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errs
}

// privateServer is a server of the test's own, so stray keys written on
// purpose never reach the tests sharing the package's server.
func privateServer(t *testing.T) *Server {
	t.Helper()
	s, err := Start()
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return s
}

func TestStrayKeyFailsTheTest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := privateServer(t)
	c := srv.Client(t)

	rec := &recorder{TB: t}
	s := newSetup(rec, srv)
	require.NoError(t, s.Client.Set(ctx, s.Prefix+":own", "1", 0).Err())
	require.NoError(t, s.Client.Set(ctx, "stray:key", "1", 0).Err())
	require.NoError(t, s.Client.Set(ctx, "t999999:x", "1", 0).Err()) // shaped like a prefix New never gave
	require.NoError(t, s.Client.Set(ctx, "nocolon", "1", 0).Err())
	errs := rec.end()

	require.Len(t, errs, 1)
	require.Contains(t, errs[0], "3 key(s) outside any running test's prefix")
	require.Contains(t, errs[0], "nocolon, stray:key, t999999:x")
	require.Contains(t, errs[0], t.Name(), "the message names the test that ended")
	require.Zero(t, c.Exists(ctx, s.Prefix+":own").Val(), "the test's own keys are deleted")
	require.EqualValues(t, 3, c.DBSize(ctx).Val(), "stray keys are left for inspection")

	// A stray key is reported once, by the first check that sees it.
	next := &recorder{TB: t}
	newSetup(next, srv)
	require.Empty(t, next.end())
}

func TestKeyWrittenAfterItsTestEndedIsALeak(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := privateServer(t)
	c := srv.Client(t)

	done := &recorder{TB: t}
	ended := newSetup(done, srv)
	require.Empty(t, done.end())
	// Something the ended test started writes on under its prefix.
	require.NoError(t, c.Set(ctx, ended.Prefix+":late", "1", 0).Err())

	rec := &recorder{TB: t}
	newSetup(rec, srv)
	errs := rec.end()
	require.Len(t, errs, 1)
	require.Contains(t, errs[0], ended.Prefix+":late")

	// Main's last check finds what is left once every test ended.
	require.NoError(t, c.Set(ctx, ended.Prefix+":later", "1", 0).Err())
	left, err := srv.leftoverKeys(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{ended.Prefix + ":later"}, left)
}

func TestReservedPrefixIsNotALeak(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := privateServer(t)
	Reserve("redistest-reserved")

	rec := &recorder{TB: t}
	s := newSetup(rec, srv)
	require.NoError(t, s.Client.Set(ctx, "redistest-reserved:k", "1", 0).Err())
	require.NoError(t, s.Client.Set(ctx, "redistest-reservedx:k", "1", 0).Err(), "only keys under \"<prefix>:\" are covered")
	errs := rec.end()
	require.Len(t, errs, 1)
	require.Contains(t, errs[0], "1 key(s)")
	require.Contains(t, errs[0], "redistest-reservedx:k")
	require.NotContains(t, errs[0], "redistest-reserved:k")
}

// TestParallelTestsPassTheCheck runs many tests at once on one server,
// each writing under its prefix while others scan and clean up: none may
// see another's keys as stray.
func TestParallelTestsPassTheCheck(t *testing.T) {
	t.Parallel()
	srv := privateServer(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var all []string
	for range 16 {
		wg.Go(func() {
			ctx := context.Background()
			for j := range 20 {
				rec := &recorder{TB: t}
				s := newSetup(rec, srv)
				for k := range 5 {
					if err := s.Client.HSet(ctx, fmt.Sprintf("%s:task:{q%d}:%d", s.Prefix, j, k), "status", "queued").Err(); err != nil {
						rec.Errorf("hset: %v", err)
					}
				}
				errs := rec.end()
				mu.Lock()
				all = append(all, errs...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Empty(t, all, strings.Join(all, "\n"))
	require.Zero(t, srv.Client(t).DBSize(context.Background()).Val(), "every test deleted its keys")
}

func TestSharedNewGivesDistinctPrefixes(t *testing.T) {
	t.Parallel()
	a, b := New(t), New(t)
	require.NotEqual(t, a.Prefix, b.Prefix)
	require.Same(t, a.Server, b.Server)
	require.NoError(t, a.Client.Set(context.Background(), a.Prefix+":k", "v", 0).Err())
	keys, err := Keys(context.Background(), b.Client, a.Prefix)
	require.NoError(t, err)
	require.Equal(t, []string{a.Prefix + ":k"}, keys)
}

// A command longer than MaxArgs fails the test that sends it.
func TestClientsRefuseLongCommands(t *testing.T) {
	t.Parallel()
	srv := Shared(t)
	ft := &fakeT{TB: t}
	c := srv.Client(ft)
	args := make([]any, 0, MaxArgs+1)
	args = append(args, "EXISTS")
	for range MaxArgs - 1 {
		args = append(args, "k")
	}
	require.NoError(t, c.Do(context.Background(), args...).Err())
	require.Empty(t, ft.errors, "MaxArgs arguments pass")
	require.NoError(t, c.Do(context.Background(), append(args, "k")...).Err())
	require.Equal(t, []string{"redistest: exists sent with 4000 arguments, more than 3999"}, ft.errors)
}

// fakeT records Errorf calls instead of failing the test.
type fakeT struct {
	testing.TB
	errors []string
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
