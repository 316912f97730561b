package partitionsuite_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/redistest"
)

// proc is a process run inside a host's namespace; it can be paused,
// killed and started again with the same arguments.
type proc struct {
	name string
	h    *host
	bin  string
	args []string
	env  []string
	log  string // its stdout and stderr

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

// start runs p in its namespace (ip netns exec execs the binary itself, so
// the pid is the process's). It dies with the test process.
func (p *proc) start(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", p.h.ns, p.bin}, p.args...)...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s on %s: %v", p.name, p.h.name, err)
	}
	p.cmd, p.exited, p.paused = cmd, make(chan struct{}), false
	exited := p.exited
	go func() { _ = cmd.Wait(); close(exited) }()
}

// signal sends sig to p's process group (a no-op once it exited).
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
}

// kill kills p (SIGKILL) and waits until it is gone.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL)
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited != nil {
		<-exited
	}
}

// stop ends p: SIGCONT and SIGTERM, SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return
	}
	select {
	case <-exited:
	case <-time.After(grace):
		p.kill()
	}
}

// redisNode is a redis-server (or Sentinel) on a host, port 6379 (26379).
type redisNode struct {
	*proc
	addr string
}

// startRedis runs redis-server on h with AOF (appendfsync always), its
// data in dir, and waits until it answers.
func startRedis(t *testing.T, h *host, dir string, extra ...string) *redisNode {
	t.Helper()
	bin, err := redistest.ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, h.name)
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--port", "6379", "--bind", h.ip, "--dir", data, "--save", "",
		"--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction",
		"--daemonize", "no", "--protected-mode", "no", "--logfile", filepath.Join(data, "redis.log")}, extra...)
	n := &redisNode{proc: &proc{name: "redis", h: h, bin: bin, args: args, log: filepath.Join(data, "stdout.log")}, addr: h.ip + ":6379"}
	n.start(t)
	t.Cleanup(func() { n.stop(5 * time.Second) })
	waitAnswer(t, n.addr)
	return n
}

// startSentinel runs a Sentinel on h monitoring master (quorum 2, down
// after 1 s) and waits until it answers.
func startSentinel(t *testing.T, h *host, dir, master string) *redisNode {
	t.Helper()
	bin, err := redistest.ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, h.name)
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	mhost, mport, _ := strings.Cut(master, ":")
	conf := filepath.Join(data, "sentinel.conf")
	text := fmt.Sprintf("port 26379\nbind %s\nprotected-mode no\ndir %s\nlogfile %s\n"+
		"sentinel monitor m %s %s 2\nsentinel down-after-milliseconds m 1000\nsentinel failover-timeout m 5000\n",
		h.ip, data, filepath.Join(data, "sentinel.log"), mhost, mport)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &redisNode{proc: &proc{name: "sentinel", h: h, bin: bin, args: []string{conf, "--sentinel"}, log: filepath.Join(data, "stdout.log")},
		addr: h.ip + ":26379"}
	n.start(t)
	t.Cleanup(func() { n.stop(5 * time.Second) })
	waitAnswer(t, n.addr)
	return n
}

// waitAnswer waits until the server at addr answers PING.
func waitAnswer(t testing.TB, addr string) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rc.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := rc.Ping(context.Background()).Err()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// info returns INFO section of the server at addr ("" when it does not
// answer).
func info(addr, section string) string {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 500 * time.Millisecond,
		ReadTimeout: time.Second})
	defer rc.Close()
	s, _ := rc.Info(context.Background(), section).Result()
	return s
}

// eventually polls cond every 50 ms until it holds or within passes, then
// fails t with what.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
