package workflow

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

const (
	ok     = dtqtype.StatusSucceeded
	failed = dtqtype.StatusFailed
	dead   = dtqtype.StatusDeadLettered
	cancel = dtqtype.StatusCancelled
	queued = dtqtype.StatusQueued
)

// step ends one node and says what it must release and cancel.
type step struct {
	ref      string
	end      dtqtype.Status
	released []string
	byDep    []string
}

func TestModelResolution(t *testing.T) {
	t.Parallel()
	n := func(ref string, p Policy, deps ...string) Node { return Node{Ref: ref, Deps: deps, OnDepFailure: p} }
	cases := []struct {
		name  string
		nodes []Node
		start []string // released at submit
		steps []step
		want  Status
	}{
		{"chain succeeds", []Node{n("a", ""), n("b", "", "a"), n("c", "", "b")}, []string{"a"},
			[]step{{"a", ok, []string{"b"}, nil}, {"b", ok, []string{"c"}, nil}, {"c", ok, nil, nil}}, Succeeded},
		{"a failed dep cancels the chain below at once", []Node{n("a", ""), n("b", "", "a"), n("c", "", "b")}, []string{"a"},
			[]step{{"a", dead, nil, []string{"b", "c"}}}, Failed},
		{"continue runs after a failed dep, and the workflow succeeds", []Node{n("a", ""), n("b", Continue, "a")}, []string{"a"},
			[]step{{"a", failed, []string{"b"}, nil}, {"b", ok, nil, nil}}, Succeeded},
		{"continue below a node cancelled by its dep runs", []Node{n("a", ""), n("b", "", "a"), n("c", Continue, "b")}, []string{"a"},
			[]step{{"a", failed, []string{"c"}, []string{"b"}}, {"c", ok, nil, nil}}, Failed},
		{"diamond join waits for both", []Node{n("a", ""), n("b", "", "a"), n("c", "", "a"), n("d", "", "b", "c")}, []string{"a"},
			[]step{{"a", ok, []string{"b", "c"}, nil}, {"b", ok, nil, nil}, {"c", ok, []string{"d"}, nil}, {"d", ok, nil, nil}}, Succeeded},
		{"a join is cancelled when its first dep fails, not when the last ends", []Node{n("a", ""), n("b", ""), n("j", "", "a", "b")},
			[]string{"a", "b"}, []step{{"a", failed, nil, []string{"j"}}, {"b", ok, nil, nil}}, Failed},
		{"a leaf failing fails the workflow", []Node{n("a", ""), n("b", "")}, []string{"a", "b"},
			[]step{{"a", ok, nil, nil}, {"b", dead, nil, nil}}, Failed},
		{"cancelling one node fails the workflow even under continue", []Node{n("a", ""), n("b", Continue, "a")}, []string{"a"},
			[]step{{"a", cancel, []string{"b"}, nil}, {"b", ok, nil, nil}}, Failed},
		{"mixed policies under one failed dep", []Node{n("a", ""), n("f", "", "a"), n("c", Continue, "a")}, []string{"a"},
			[]step{{"a", failed, []string{"c"}, []string{"f"}}, {"c", ok, nil, nil}}, Failed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, Validate(tc.nodes, 0))
			m := NewModel(tc.nodes)
			var start []string
			for _, nd := range tc.nodes {
				if m.NodeStatus(nd.Ref) == queued {
					start = append(start, nd.Ref)
				}
			}
			require.Equal(t, tc.start, start)
			for _, s := range tc.steps {
				require.Equal(t, Running, m.Status(), "before %s ends", s.ref)
				rel, byDep, err := m.End(s.ref, s.end)
				require.NoError(t, err)
				require.Equal(t, s.released, rel, "released by %s", s.ref)
				require.Equal(t, s.byDep, byDep, "cancelled by %s", s.ref)
				for _, r := range byDep {
					require.True(t, m.CancelledByDep(r))
				}
			}
			require.Equal(t, tc.want, m.Status())
		})
	}
}

func TestModelRefusesWhatCannotHappen(t *testing.T) {
	t.Parallel()
	m := NewModel([]Node{{Ref: "a"}, {Ref: "b", Deps: []string{"a"}}})
	_, _, err := m.End("b", ok)
	require.ErrorContains(t, err, "waiting", "a waiting node cannot end")
	_, _, err = m.End("a", queued)
	require.ErrorContains(t, err, "not an end")
	_, _, err = m.End("zz", ok)
	require.Error(t, err)
	_, _, err = m.End("a", ok)
	require.NoError(t, err)
	_, _, err = m.End("a", ok)
	require.Error(t, err, "a node ends once")
}

func TestModelCancelAndAdd(t *testing.T) {
	t.Parallel()
	m := NewModel([]Node{{Ref: "a"}, {Ref: "b", Deps: []string{"a"}}})
	// Fan-out from running a: a new node on a, and one on an already
	// failed node is resolved at once.
	rel, byDep := m.Add([]Node{{Ref: "c", Deps: []string{"a"}}, {Ref: "d"}})
	require.Equal(t, []string{"d"}, rel)
	require.Empty(t, byDep)
	_, _, err := m.End("d", failed)
	require.NoError(t, err)
	rel, byDep = m.Add([]Node{{Ref: "e", Deps: []string{"d"}}, {Ref: "f", Deps: []string{"d"}, OnDepFailure: Continue}, {Ref: "g", Deps: []string{"e"}}})
	require.Equal(t, []string{"f"}, rel)
	require.Equal(t, []string{"e", "g"}, byDep)
	require.Equal(t, []string{"a", "b", "c"}, func() []string {
		c := m.Cancel()
		return c[:3]
	}())
	require.Equal(t, Cancelled, m.Status())
	require.Equal(t, []string{"a", "b", "c", "d", "e", "f", "g"}, m.FailedRefs())
}

// TestModelRandomDAGs runs random DAGs (chains, diamonds, wide fan-in and
// fan-out) to the end with random outcomes, in random order, and checks at
// rest what a workflow promises: every node has ended; none was released
// before its deps ended; a Fail node with a failed dep never ran and was
// cancelled with DependencyFailed; a node that ran had every dep ended;
// and the workflow's status follows from its nodes.
func TestModelRandomDAGs(t *testing.T) {
	t.Parallel()
	outcomes := []dtqtype.Status{ok, ok, ok, ok, failed, dead, dtqtype.StatusExpired, cancel}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 42))
		nodes := randomDAG(rng, 1+rng.IntN(60))
		require.NoError(t, Validate(nodes, 0), "seed %d", seed)
		m := NewModel(nodes)
		ran := map[string]bool{}
		endedAt := map[string]int{}
		clock := 0
		for {
			var ready []string
			for _, nd := range nodes {
				if m.NodeStatus(nd.Ref) == queued {
					ready = append(ready, nd.Ref)
				}
			}
			if len(ready) == 0 {
				break
			}
			r := ready[rng.IntN(len(ready))]
			clock++
			for _, nd := range nodes {
				if nd.Ref == r {
					for _, d := range nd.Deps {
						require.True(t, m.NodeStatus(d).Terminal(), "seed %d: %s released before dep %s ended", seed, r, d)
					}
				}
			}
			ran[r] = true
			_, byDep, err := m.End(r, outcomes[rng.IntN(len(outcomes))])
			require.NoError(t, err)
			endedAt[r] = clock
			for _, c := range byDep {
				endedAt[c] = clock
			}
		}
		require.NotEqual(t, Running, m.Status(), "seed %d: the workflow must end", seed)
		forced, bad := false, false
		for _, nd := range nodes {
			st := m.NodeStatus(nd.Ref)
			require.True(t, st.Terminal(), "seed %d: node %s stranded %s", seed, nd.Ref, st)
			depFailed := false
			for _, d := range nd.Deps {
				if m.NodeStatus(d) != ok {
					depFailed = true
				}
			}
			if depFailed && nd.policy() == Fail {
				require.False(t, ran[nd.Ref], "seed %d: %s ran although a dep failed", seed, nd.Ref)
				require.True(t, m.CancelledByDep(nd.Ref), "seed %d: %s", seed, nd.Ref)
			} else {
				require.True(t, ran[nd.Ref], "seed %d: %s never ran", seed, nd.Ref)
			}
			if ran[nd.Ref] && st == cancel {
				forced = true
			}
			if st != ok {
				dependants := 0
				for _, o := range nodes {
					for _, d := range o.Deps {
						if d == nd.Ref {
							dependants++
							if o.policy() != Continue {
								bad = true
							}
						}
					}
				}
				if dependants == 0 {
					bad = true
				}
			}
		}
		want := Succeeded
		if forced || bad {
			want = Failed
		}
		require.Equal(t, want, m.Status(), "seed %d", seed)
	}
}

// randomDAG makes n nodes, each depending on a random set of earlier ones
// (so the graph has no cycle), with shapes from chains to wide fan-ins.
func randomDAG(rng *rand.Rand, n int) []Node {
	nodes := make([]Node, n)
	for i := range nodes {
		nodes[i].Ref = fmt.Sprintf("n%d", i)
		if rng.IntN(4) == 0 {
			nodes[i].OnDepFailure = Continue
		}
		if i == 0 {
			continue
		}
		switch rng.IntN(3) {
		case 0: // chain
			nodes[i].Deps = []string{nodes[i-1].Ref}
		case 1: // a few earlier nodes
			for j := range i {
				if rng.IntN(i) < 2 {
					nodes[i].Deps = append(nodes[i].Deps, nodes[j].Ref)
				}
			}
		default: // fan-in of many, or none
			if rng.IntN(2) == 0 {
				for j := range i {
					nodes[i].Deps = append(nodes[i].Deps, nodes[j].Ref)
				}
			}
		}
	}
	rng.Shuffle(len(nodes), func(a, b int) { nodes[a], nodes[b] = nodes[b], nodes[a] })
	return nodes
}
