package partitionsuite_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// namePrefix starts the name of every namespace, link and table this suite
// makes, followed by the test process's pid: a sweep at start removes what a
// dead process left (see sweep).
const namePrefix = "dtqn"

// requireTools fails t, naming what is missing, unless the suite can build
// its network: root, ip, tc and nft.
func requireTools(t *testing.T) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces need CAP_NET_ADMIN)")
	}
	for _, tool := range []string{"ip", "tc", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (apt-get install -y iproute2 nftables)")
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the partition suite cannot run: missing %s", strings.Join(missing, ", "))
	}
}

// run runs a command and fails t with its output if it fails.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// runInput is run with stdin.
func runInput(t testing.TB, stdin, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s\n%s", name, strings.Join(args, " "), err, out, stdin)
	}
}

// sweep removes the namespaces and links of earlier runs whose process is
// gone (killed before its cleanup ran), with the processes inside them.
func sweep(t *testing.T) {
	t.Helper()
	owner := func(name string) (int, bool) {
		rest, ok := strings.CutPrefix(name, namePrefix)
		if !ok {
			return 0, false
		}
		end := 0
		for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
			end++
		}
		pid, err := strconv.Atoi(rest[:end])
		return pid, err == nil
	}
	dead := func(name string) bool {
		pid, ok := owner(name)
		if !ok {
			return false
		}
		if pid == os.Getpid() {
			return true // a leftover of this process's own earlier test
		}
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for line := range strings.Lines(string(out)) {
		ns, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if dead(ns) {
			removeNamespace(ns)
		}
	}
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if dead(name) {
			_ = exec.Command("ip", "link", "del", name).Run()
		}
	}
}

// removeNamespace kills every process in ns and deletes it (its links and
// nft tables go with it).
func removeNamespace(ns string) {
	for range 50 {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = exec.Command("ip", "netns", "del", ns).Run()
}

// network is one test's hosts: namespaces on a bridge in the root
// namespace, which holds the address .254 (the test process, the observer,
// reaches every host through it and is never partitioned).
type network struct {
	t      *testing.T
	id     string // namePrefix + pid + a letter per network of the process
	subnet string // "10.a.b"
	bridge string
	hosts  map[string]*host
	order  []string

	mu      sync.Mutex
	dropIn  map[string]map[string]bool // host -> source IPs its input drops
	dropOut map[string]map[string]bool // host -> destination IPs its output drops
	loss    map[string]int             // host -> % of its packets dropped at random
}

// host is one network namespace with one address.
type host struct {
	name string
	ns   string
	ip   string
	veth string
}

var networks struct {
	mu sync.Mutex
	n  int
}

// newNetwork makes the bridge of a new network; hosts are added with add.
// Everything is removed when t ends, failed or not.
func newNetwork(t *testing.T) *network {
	t.Helper()
	requireTools(t)
	sweep(t)
	networks.mu.Lock()
	k := networks.n
	networks.n++
	networks.mu.Unlock()
	pid := os.Getpid()
	n := &network{t: t, id: fmt.Sprintf("%s%d%c", namePrefix, pid, 'a'+k%26),
		subnet: fmt.Sprintf("10.%d.%d", 100+pid/250%100, (pid+k)%250), hosts: map[string]*host{},
		dropIn: map[string]map[string]bool{}, dropOut: map[string]map[string]bool{}, loss: map[string]int{}}
	n.bridge = n.id + "b"
	t.Cleanup(n.remove)
	run(t, "ip", "link", "add", n.bridge, "type", "bridge")
	run(t, "ip", "addr", "add", n.subnet+".254/24", "dev", n.bridge)
	run(t, "ip", "link", "set", n.bridge, "up")
	return n
}

// remove deletes every namespace (killing what runs in it) and the bridge.
func (n *network) remove() {
	for _, name := range n.order {
		removeNamespace(n.hosts[name].ns)
	}
	_ = exec.Command("ip", "link", "del", n.bridge).Run()
}

// add makes host name: a namespace joined to the bridge by a veth pair.
func (n *network) add(names ...string) {
	for _, name := range names {
		i := len(n.order) + 1
		h := &host{name: name, ns: n.id + "-" + name, ip: fmt.Sprintf("%s.%d", n.subnet, i), veth: fmt.Sprintf("%sv%d", n.id, i)}
		n.hosts[name] = h
		n.order = append(n.order, name)
		run(n.t, "ip", "netns", "add", h.ns)
		run(n.t, "ip", "link", "add", h.veth, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
		run(n.t, "ip", "link", "set", h.veth, "master", n.bridge, "up")
		run(n.t, "ip", "-n", h.ns, "addr", "add", h.ip+"/24", "dev", "eth0")
		run(n.t, "ip", "-n", h.ns, "link", "set", "eth0", "up")
		run(n.t, "ip", "-n", h.ns, "link", "set", "lo", "up")
	}
}

// h returns host name.
func (n *network) h(name string) *host {
	h, ok := n.hosts[name]
	if !ok {
		n.t.Fatalf("no host %s", name)
	}
	return h
}

// apply writes host name's nft rules from dropIn and dropOut.
func (n *network) apply(name string) {
	h := n.h(name)
	set := func(m map[string]bool) string {
		ips := make([]string, 0, len(m))
		for ip := range m {
			ips = append(ips, ip)
		}
		slices.Sort(ips)
		return strings.Join(ips, ", ")
	}
	var b bytes.Buffer
	b.WriteString("flush ruleset\n")
	if len(n.dropIn[name])+len(n.dropOut[name]) > 0 || n.loss[name] > 0 {
		b.WriteString("table inet " + namePrefix + " {\n")
		b.WriteString("  chain in {\n    type filter hook input priority 0;\n")
		if len(n.dropIn[name]) > 0 {
			fmt.Fprintf(&b, "    ip saddr { %s } drop\n", set(n.dropIn[name]))
		}
		b.WriteString("  }\n  chain out {\n    type filter hook output priority 0;\n")
		if len(n.dropOut[name]) > 0 {
			fmt.Fprintf(&b, "    ip daddr { %s } drop\n", set(n.dropOut[name]))
		}
		if n.loss[name] > 0 {
			fmt.Fprintf(&b, "    numgen random mod 100 < %d drop\n", n.loss[name])
		}
		b.WriteString("  }\n}\n")
	}
	runInput(n.t, b.String(), "ip", "netns", "exec", h.ns, "nft", "-f", "-")
}

// oneWay drops every packet from the hosts of from to the hosts of to
// (answers the other way still pass, but no TCP connection gets through).
func (n *network) oneWay(from, to []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, dst := range to {
		for _, src := range from {
			if src == dst {
				continue
			}
			if n.dropIn[dst] == nil {
				n.dropIn[dst] = map[string]bool{}
			}
			n.dropIn[dst][n.h(src).ip] = true
			if n.dropOut[src] == nil {
				n.dropOut[src] = map[string]bool{}
			}
			n.dropOut[src][n.h(dst).ip] = true
		}
	}
	for _, name := range uniq(from, to) {
		n.apply(name)
	}
}

// partition cuts every host of a from every host of b, both ways.
func (n *network) partition(a, b []string) {
	n.oneWay(a, b)
	n.oneWay(b, a)
}

// heal removes every partition.
func (n *network) heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, name := range n.order {
		if len(n.dropIn[name])+len(n.dropOut[name]) > 0 {
			n.dropIn[name], n.dropOut[name] = nil, nil
			n.apply(name) // keeps a degrade's loss until restore
		}
	}
}

// degrade makes the link of host name slow and lossy: tc netem's delay
// and loss where the kernel has sch_netem; else a token bucket (tc tbf: a
// slow link whose queue delays packets up to delay) and nft dropping loss
// % of its packets at random. It returns which of the two it used.
func (n *network) degrade(name string, delay time.Duration, loss int) string {
	h := n.h(name)
	ms := strconv.Itoa(int(delay.Milliseconds())) + "ms"
	if exec.Command("ip", "netns", "exec", h.ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "netem",
		"delay", ms, "loss", strconv.Itoa(loss)+"%").Run() == nil {
		return "netem"
	}
	run(n.t, "ip", "netns", "exec", h.ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
		"rate", "1mbit", "burst", "16kbit", "latency", ms)
	n.mu.Lock()
	n.loss[name] = loss
	n.apply(name)
	n.mu.Unlock()
	return "tbf+nft-loss (no sch_netem in this kernel)"
}

// restore removes what degrade did to host name.
func (n *network) restore(name string) {
	h := n.h(name)
	_ = exec.Command("ip", "netns", "exec", h.ns, "tc", "qdisc", "del", "dev", "eth0", "root").Run()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.loss[name] > 0 {
		n.loss[name] = 0
		n.apply(name)
	}
}

func uniq(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, s := range l {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// others returns the hosts of n not in except.
func (n *network) others(except ...string) []string {
	var out []string
	for _, name := range n.order {
		if !slices.Contains(except, name) {
			out = append(out, name)
		}
	}
	return out
}
