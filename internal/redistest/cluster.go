package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of private redis-server processes, created
// with redis-cli --cluster create, as an operator would.
type Cluster struct {
	Nodes []*Server // masters first as created; roles change on failover
	// NodeTimeout is the cluster-node-timeout the nodes run with.
	NodeTimeout time.Duration
}

// StartCluster starts masters masters (at least 3) with replicas replicas
// each, creates the cluster and waits until every node reports
// cluster_state:ok with all 16384 slots served and every replica's link to
// its master is up. Extra args go to every redis-server.
func StartCluster(masters, replicas int, extra ...string) (*Cluster, error) {
	cli, err := CLIBinary()
	if err != nil {
		return nil, err
	}
	c := &Cluster{NodeTimeout: 2 * time.Second}
	args := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(c.NodeTimeout.Milliseconds(), 10)}, extra...)
	for range masters * (1 + replicas) {
		s, err := Start(args...)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, s)
	}
	create := []string{"--cluster", "create"}
	for _, s := range c.Nodes {
		create = append(create, s.Addr)
	}
	create = append(create, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.CommandContext(context.Background(), cli, create...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %w: %s", err, out)
	}
	if err := c.WaitHealthy(60 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// WaitHealthy waits until every running node sees cluster_state:ok with
// all slots assigned and ok, and every replica's master link is up.
func (c *Cluster) WaitHealthy(within time.Duration) error {
	ctx := context.Background()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		last = ""
		for _, s := range c.Nodes {
			if !s.Running() {
				continue
			}
			if why := nodeHealth(ctx, s.Addr); why != "" {
				last = s.Addr + ": " + why
				break
			}
		}
		if last == "" {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redistest: cluster not healthy after %v: %s", within, last)
}

// nodeHealth returns why the node at addr is not healthy yet, or "".
func nodeHealth(ctx context.Context, addr string) string {
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rc.Close()
	info, err := rc.ClusterInfo(ctx).Result()
	if err != nil {
		return err.Error()
	}
	if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_slots_ok:16384") {
		return "cluster state not ok"
	}
	repl, err := rc.Info(ctx, "replication").Result()
	if err != nil {
		return err.Error()
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return "replica link down"
	}
	return ""
}

// Addrs returns every node's address.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr
	}
	return out
}

// Client returns a cluster client of the nodes, closed when t ends. A
// command of more than MaxArgs arguments on it fails t.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), PoolSize: 64})
	cc.AddHook(argLimit{t})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// MasterOf returns the running node that is master of key's slot now.
func (c *Cluster) MasterOf(ctx context.Context, key string) (*Server, error) {
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		slot, err := rc.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			rc.Close()
			continue
		}
		shards, err := rc.ClusterShards(ctx).Result()
		rc.Close()
		if err != nil {
			continue
		}
		for _, sh := range shards {
			for _, r := range sh.Slots {
				if int(slot) < int(r.Start) || int(slot) > int(r.End) {
					continue
				}
				for _, node := range sh.Nodes {
					if node.Role != "master" {
						continue
					}
					for _, n := range c.Nodes {
						if n.port == int(node.Port) {
							return n, nil
						}
					}
				}
			}
		}
		break
	}
	return nil, fmt.Errorf("redistest: no master found for %q", key)
}

// Masters returns the running nodes that are masters now.
func (c *Cluster) Masters(ctx context.Context) []*Server {
	var out []*Server
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		rc := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		info, err := rc.Info(ctx, "replication").Result()
		rc.Close()
		if err == nil && strings.Contains(info, "role:master") {
			out = append(out, s)
		}
	}
	return out
}

// Stop stops every node.
func (c *Cluster) Stop() {
	for _, s := range c.Nodes {
		s.Stop()
	}
}

// Sentinels is a master, its replicas and the Sentinels watching them.
type Sentinels struct {
	Master    *Server
	Replicas  []*Server
	Sentinels []*Server
	Name      string // the monitored master's name
}

// SentinelDownAfter is how long the Sentinels of StartSentinels wait for a
// silent master before they fail it over. A shorter time lets one Sentinel
// on a loaded host fail over a master that is only slow, a second time
// right after the first.
const SentinelDownAfter = 5 * time.Second

// persistent are the arguments of every node of a Sentinel set: the
// append-only file, fsynced every second. A master restarted without its
// data is empty, and a failover to it wipes its replicas.
var persistent = []string{"--appendonly", "yes", "--appendfsync", "everysec"}

// StartSentinels starts a master with replicas replicas and n Sentinels
// (quorum n/2+1, a master is considered down after SentinelDownAfter) and
// waits until the replicas' links are up and every Sentinel knows them.
// Every node keeps an append-only file in its directory, which Restart
// keeps: a killed node comes back with its data and rejoins as a replica.
func StartSentinels(replicas, n int) (*Sentinels, error) {
	return StartSentinelsWith(replicas, n, persistent)
}

// StartSentinelsWith is StartSentinels with nodeArgs, not the append-only
// file, passed to every redis-server of the set.
func StartSentinelsWith(replicas, n int, nodeArgs []string) (*Sentinels, error) {
	st := &Sentinels{Name: "dtqtest"}
	m, err := Start(nodeArgs...)
	if err != nil {
		return nil, err
	}
	st.Master = m
	for range replicas {
		r, err := Start(append(slices.Clone(nodeArgs), "--replicaof", strings.Replace(m.Addr, ":", " ", 1))...)
		if err != nil {
			st.Stop()
			return nil, err
		}
		st.Replicas = append(st.Replicas, r)
	}
	for range n {
		s, err := StartSentinelAfter(st.Name, m.Addr, n/2+1, SentinelDownAfter)
		if err != nil {
			st.Stop()
			return nil, err
		}
		st.Sentinels = append(st.Sentinels, s)
	}
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if st.ready(ctx, replicas) {
			return st, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	st.Stop()
	return nil, fmt.Errorf("redistest: sentinels did not see %d replicas with their links up", replicas)
}

func (st *Sentinels) ready(ctx context.Context, replicas int) bool {
	for _, r := range st.Replicas {
		rc := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1})
		info, err := rc.Info(ctx, "replication").Result()
		rc.Close()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return false
		}
	}
	for _, s := range st.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		rs, err := sc.Replicas(ctx, st.Name).Result()
		sc.Close()
		if err != nil || len(rs) < replicas {
			return false
		}
	}
	return true
}

// URL is the redis+sentinel:// URL of the set, db 0.
func (st *Sentinels) URL() string {
	addrs := make([]string, len(st.Sentinels))
	for i, s := range st.Sentinels {
		addrs[i] = s.Addr
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + st.Name + "/0"
}

// CurrentMaster returns the node the Sentinels name as master now.
func (st *Sentinels) CurrentMaster(ctx context.Context) (*Server, error) {
	for _, s := range st.Sentinels {
		if addr, err := st.namedMaster(ctx, s); err == nil {
			if n := st.node(addr); n != nil {
				return n, nil
			}
		}
	}
	return nil, fmt.Errorf("redistest: no sentinel names a master")
}

// namedMaster returns the address Sentinel s names as the set's master.
func (st *Sentinels) namedMaster(ctx context.Context, s *Server) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(ctx, st.Name).Result()
	if err == nil && len(addr) != 2 {
		err = fmt.Errorf("redistest: sentinel %s answered %q for the master", s.Addr, addr)
	}
	if err != nil {
		return "", err
	}
	return addr[0] + ":" + addr[1], nil
}

// node returns the server of the set at addr, or nil.
func (st *Sentinels) node(addr string) *Server {
	for _, n := range append([]*Server{st.Master}, st.Replicas...) {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// AgreedMaster returns the node every Sentinel names as master, or an
// error while they differ (a failover not yet known to all) or one does not
// answer. A Sentinel that still names the old master would send clients
// there once it runs again.
func (st *Sentinels) AgreedMaster(ctx context.Context) (*Server, error) {
	var agreed string
	for _, s := range st.Sentinels {
		a, err := st.namedMaster(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("redistest: sentinel %s names no master: %w", s.Addr, err)
		}
		if agreed == "" {
			agreed = a
		} else if a != agreed {
			return nil, fmt.Errorf("redistest: sentinels name %s and %s", agreed, a)
		}
	}
	if n := st.node(agreed); n != nil {
		return n, nil
	}
	return nil, fmt.Errorf("redistest: sentinels name %q, not a node of the set", agreed)
}

// Stop stops every process.
func (st *Sentinels) Stop() {
	for _, s := range st.Sentinels {
		s.Stop()
	}
	for _, r := range st.Replicas {
		r.Stop()
	}
	if st.Master != nil {
		st.Master.Stop()
	}
}
