// Package devredis provides the Redis that `dtq dev` runs against when no
// DTQ_REDIS_URL is given: a private redis-server child process with its
// data and AOF in a local directory, or, when redis-server is not installed,
// an in-process miniredis that keeps everything in memory.
package devredis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Backend is a running Redis for local development.
type Backend interface {
	// URL is the redis:// URL clients connect to.
	URL() string
	// Describe says what the backend is and where its data lives, for the
	// startup line.
	Describe() string
	// Stop shuts the backend down and waits for it; ctx bounds the wait.
	Stop(ctx context.Context) error
}

// ErrNoRedisServer is returned by StartServer when redis-server is not on PATH.
var ErrNoRedisServer = errors.New("devredis: redis-server not found on PATH")

// Server is a private redis-server child process.
type Server struct {
	addr string
	dir  string
	cmd  *exec.Cmd

	exited  chan struct{} // closed when the process has exited
	stopped sync.Once
	stopErr error
}

// PortFile is the file in the data directory that keeps the private
// redis-server's port, so that a restart of dev on the same directory
// serves the same redis:// URL (a program pointed at it keeps working).
const PortFile = "redis.port"

// ErrPortInUse is returned by StartServer when the port asked for is taken.
var ErrPortInUse = errors.New("devredis: port in use")

// StartServer starts redis-server from PATH on a loopback port, with
// its data and AOF in dir (created if needed; appendonly yes, appendfsync
// everysec), maxmemory 1gb with maxmemory-policy noeviction (so that /ready
// and the dashboard show memory against a limit, as in production), and
// waits until it answers.
// A port > 0 is used as given (ErrPortInUse when taken). With port 0 the
// port the directory's last server used (PortFile) is taken again when it
// is free, else a free one; either way the port is written to PortFile.
// The server is in its own process group so that a Ctrl-C reaches only dtq,
// which stops it last, after the API and worker have drained.
func StartServer(ctx context.Context, dir string, port int) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNoRedisServer
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("devredis: create data directory: %w", err)
	}
	portFile := filepath.Join(abs, PortFile)
	pinned := port > 0
	if pinned && !portFree(ctx, port) {
		return nil, fmt.Errorf("%w: 127.0.0.1:%d is taken (by another dtq dev, or another program)", ErrPortInUse, port)
	}
	if !pinned {
		if kept := storedPort(portFile); kept > 0 && portFree(ctx, kept) {
			port = kept
		}
	}
	var lastErr error
	for range 3 { // a port found free can be taken before redis-server binds it
		if port == 0 {
			if port, err = freePort(ctx); err != nil {
				return nil, err
			}
		}
		s, err := startServer(ctx, bin, abs, port)
		if err == nil {
			if err := os.WriteFile(portFile, []byte(strconv.Itoa(port)+"\n"), 0o600); err != nil {
				_ = s.Stop(context.WithoutCancel(ctx))
				return nil, fmt.Errorf("devredis: keep the port in %s: %w", portFile, err)
			}
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil || pinned {
			break
		}
		port = 0
	}
	return nil, lastErr
}

// storedPort reads PortFile; 0 when it is missing or unreadable.
func storedPort(path string) int {
	b, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 || n > 65535 {
		return 0
	}
	return n
}

// portFree reports whether 127.0.0.1:port can be bound now.
func portFree(ctx context.Context, port int) bool {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func startServer(ctx context.Context, bin, dir string, port int) (*Server, error) {
	s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	logFile := filepath.Join(dir, "redis.log")
	// The server outlives ctx (the start's): Stop ends it, with SIGTERM so
	// that it syncs its AOF.
	s.cmd = exec.CommandContext(context.WithoutCancel(ctx), bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--appendonly", "yes", "--appendfsync", "everysec",
		"--save", "", "--maxmemory", "1gb", "--maxmemory-policy", "noeviction", "--hash-max-listpack-value", "1024",
		"--daemonize", "no", "--logfile", logFile)
	detach(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("devredis: start redis-server: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	deadline := time.NewTimer(15 * time.Second) // replaying a large AOF takes a while
	defer deadline.Stop()
	for {
		select {
		case <-s.exited:
			tail, _ := os.ReadFile(filepath.Clean(logFile))
			return nil, fmt.Errorf("devredis: redis-server exited at start (see %s): %s", logFile, lastLines(tail, 3))
		case <-ctx.Done():
			_ = s.Stop(context.WithoutCancel(ctx))
			return nil, ctx.Err()
		case <-deadline.C:
			_ = s.Stop(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("devredis: redis-server on %s did not answer within 15s (see %s)", s.addr, logFile)
		case <-poll.C:
		}
		if err := c.Ping(ctx).Err(); err == nil {
			return s, nil
		}
	}
}

// URL implements Backend.
func (s *Server) URL() string { return "redis://" + s.addr + "/0" }

// Dir returns the data directory.
func (s *Server) Dir() string { return s.dir }

// Describe implements Backend.
func (s *Server) Describe() string {
	dir := s.dir
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, s.dir); err == nil && filepath.IsLocal(rel) {
			dir = "." + string(filepath.Separator) + rel
		}
	}
	return "private redis-server, data in " + dir
}

// Stop asks redis-server to shut down (SIGTERM: it flushes the AOF first)
// and waits for it; when ctx ends first the process is killed.
func (s *Server) Stop(ctx context.Context) error {
	s.stopped.Do(func() {
		_ = terminate(s.cmd.Process)
		select {
		case <-s.exited:
		case <-ctx.Done():
			_ = s.cmd.Process.Kill()
			<-s.exited
			s.stopErr = fmt.Errorf("devredis: redis-server did not stop in time and was killed: %w", ctx.Err())
		}
	})
	return s.stopErr
}

// Memory is an in-process miniredis. It holds everything in memory: the
// data is gone when the process exits.
type Memory struct {
	m *miniredis.Miniredis
}

// StartMemory starts miniredis on a free loopback port. Its clock drives
// TTLs (ClockTTL): keys expire as wall time passes, like on a real Redis.
func StartMemory() (*Memory, error) {
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("devredis: start miniredis: %w", err)
	}
	return &Memory{m: m}, nil
}

// URL implements Backend.
func (m *Memory) URL() string { return "redis://" + m.m.Addr() + "/0" }

// Describe implements Backend.
func (m *Memory) Describe() string {
	return "in-process miniredis, memory only; data is lost on exit"
}

// Stop implements Backend.
func (m *Memory) Stop(context.Context) error {
	m.m.Close()
	return nil
}

func freePort(ctx context.Context) (int, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("devredis: listening on %v, not a TCP address", l.Addr())
	}
	return addr.Port, nil
}

func lastLines(b []byte, n int) string {
	lines := strings.FieldsFunc(string(b), func(r rune) bool { return r == '\n' })
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
