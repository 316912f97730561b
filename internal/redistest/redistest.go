// Package redistest starts private redis-server processes for tests. Tests
// never touch a Redis someone else uses: each package gets its own server on
// a free loopback port, and each test its own key prefix on it.
//
// The server is redis-server from PATH, and Cluster's tool redis-cli. The
// environment variable DTQ_TEST_REDIS_SERVER (ServerEnv), an absolute path,
// picks another server binary instead, such as Valkey's valkey-server; its
// cli is the -cli beside it (valkey-cli). make test-compat runs the suites
// this way against each server it is given (docs/compatibility.md). A
// binary named there that is missing fails the tests with its name.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server child process.
type Server struct {
	Addr string
	dir  string
	port int
	bin  string
	args []string

	mu    sync.Mutex
	cmd   *exec.Cmd
	alive bool

	prefixes prefixRegistry // the prefixes New handed out on this server

	user, password string // Client's ACL user ("": the default user)
}

// Running reports whether the server was started and not killed since.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.alive
}

// Start launches redis-server (ServerBinary: from PATH, or ServerEnv's) on a
// free loopback port with its data in a temporary directory. Extra args are
// passed to redis-server.
func Start(extra ...string) (*Server, error) {
	bin, err := ServerBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dtq-redistest-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, port: port, bin: bin}
		s.args = append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--dir", dir, "--save", "", "--appendonly", "no",
			"--maxmemory-policy", "noeviction", "--daemonize", "no",
			"--logfile", filepath.Join(dir, "redis.log"),
		}, extra...)
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir) // a temp dir: nothing to do if it stays
	return nil, lastErr
}

// StartSentinel starts a Sentinel on a free port that monitors master
// under name (quorum q; the master is considered down after 1s).
func StartSentinel(name, master string, q int) (*Server, error) {
	return StartSentinelAfter(name, master, q, time.Second)
}

// StartSentinelAfter is StartSentinel with the master considered down after
// downAfter without an answer.
func StartSentinelAfter(name, master string, q int, downAfter time.Duration) (*Server, error) {
	bin, err := ServerBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dtq-sentinel-")
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(master)
	var lastErr error
	for range 5 {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s %s %s %d\nsentinel down-after-milliseconds %s %d\nsentinel failover-timeout %s 10000\n",
			p, dir, filepath.Join(dir, "redis.log"), name, host, port, q, name, downAfter.Milliseconds(), name)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(p), dir: dir, port: p, bin: bin, args: []string{conf, "--sentinel"}}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir) // a temp dir: nothing to do if it stays
	return nil, lastErr
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	markDown(s.port, false)
	cmd := exec.CommandContext(context.Background(), s.bin, s.args...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	pid := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redistest: redis-server exited at start: %s", log)
		default:
		}
		// The answer must come from this process: a server another test
		// started on the port first would answer too.
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		info, err := c.Info(context.Background(), "server").Result()
		c.Close()
		if err == nil && strings.Contains(info, pid) {
			s.alive = true
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return fmt.Errorf("redistest: redis-server on %s did not answer within 10s", s.Addr)
}

// Kill stops the server abruptly (SIGKILL), as a crash would.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alive = false
	markDown(s.port, true)
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		for range 500 {
			c, err := (&net.Dialer{Timeout: 50 * time.Millisecond}).DialContext(context.Background(), "tcp", s.Addr)
			if err != nil {
				break
			}
			c.Close()
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Restart starts the server again on the same port after Kill.
func (s *Server) Restart() error { return s.start() }

// Stop kills the server and removes its directory.
func (s *Server) Stop() {
	s.Kill()
	markDown(s.port, false) // never restarted: the port is free again
	_ = os.RemoveAll(s.dir) // a temp dir: nothing to do if it stays
}

// URL returns the redis:// URL of the server.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Client returns a new client of the server, closed when t ends. A
// command of more than MaxArgs arguments on it fails t.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 64, Username: s.user, Password: s.password})
	c.AddHook(argLimit{t})
	t.Cleanup(func() { c.Close() })
	return c
}

// AdminClient returns a new client of the server as its default user,
// closed when t ends: for a test's own set-up and checks that use commands
// a restricted server's Client may not (see Restricted).
func (s *Server) AdminClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 8})
	t.Cleanup(func() { c.Close() })
	return c
}

// ManagedDenied are the commands managed Redis services commonly refuse,
// as ACL rules: Restricted's user is denied them (docs/compatibility.md).
var ManagedDenied = []string{"-config", "-keys", "-scan", "-debug", "-flushall", "-flushdb",
	"-script|flush", "-client|kill", "-shutdown", "-monitor"}

// restrict makes Client log in as an ACL user denied ManagedDenied.
func (s *Server) restrict() error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	args := []any{"ACL", "SETUSER", "dtq-test", "on", ">dtq-test", "~*", "&*", "+@all"}
	for _, r := range ManagedDenied {
		args = append(args, r)
	}
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		return fmt.Errorf("redistest: create the restricted user: %w", err)
	}
	s.user, s.password = "dtq-test", "dtq-test"
	return nil
}
