package workflow

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	t.Parallel()
	dep := func(ref string, deps ...string) Node { return Node{Ref: ref, Deps: deps} }
	fanIn := make([]Node, 0, DefaultMaxNodes)
	var all []string
	for i := range DefaultMaxNodes - 1 {
		r := fmt.Sprintf("leaf-%d", i)
		fanIn = append(fanIn, dep(r))
		all = append(all, r)
	}
	fanIn = append(fanIn, dep("join", all...))
	cases := []struct {
		name     string
		nodes    []Node
		max      int
		node     string // "" = valid
		contains string
	}{
		{"one node", []Node{dep("a")}, 0, "", ""},
		{"chain", []Node{dep("a"), dep("b", "a"), dep("c", "b")}, 0, "", ""},
		{"diamond, listed out of order", []Node{dep("d", "b", "c"), dep("b", "a"), dep("c", "a"), dep("a")}, 0, "", ""},
		{"10,000-dep join", fanIn, 0, "", ""},
		{"continue policy", []Node{dep("a"), {Ref: "b", Deps: []string{"a"}, OnDepFailure: Continue}}, 0, "", ""},
		{"no nodes", nil, 0, "nodes", "at least one"},
		{"too many", []Node{dep("a"), dep("b"), dep("c")}, 2, "nodes", "limit is 2"},
		{"bad ref", []Node{dep("a"), dep("Bad Ref")}, 0, "nodes[1]", "a-z 0-9"},
		{"missing ref", []Node{dep("")}, 0, "nodes[0]", "missing"},
		{"ref too long", []Node{dep(strings.Repeat("a", 65))}, 0, "nodes[0]", "1..64"},
		{"duplicate ref", []Node{dep("a"), dep("a")}, 0, "a", "twice"},
		{"unknown dep", []Node{dep("a", "ghost")}, 0, "a", `"ghost" is not a node`},
		{"self dep", []Node{dep("a", "a")}, 0, "a", "itself"},
		{"dep listed twice", []Node{dep("a"), dep("b", "a", "a")}, 0, "b", "listed twice"},
		{"bad policy", []Node{{Ref: "a", OnDepFailure: "retry"}}, 0, "a", "on_dep_failure"},
		{"two-node cycle", []Node{dep("a", "b"), dep("b", "a")}, 0, "", "cycle"},
		{"cycle behind a chain", []Node{dep("root"), dep("x", "root", "z"), dep("y", "x"), dep("z", "y"), dep("tail", "z")}, 0, "", "cycle"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Validate(tc.nodes, tc.max)
			if tc.contains == "" {
				require.NoError(t, err)
				return
			}
			var we *Error
			require.ErrorAs(t, err, &we)
			require.Contains(t, we.Reason, tc.contains)
			if tc.node != "" {
				require.Equal(t, tc.node, we.Node)
			}
			if tc.contains == "cycle" {
				require.Contains(t, []string{"a", "b", "x", "y", "z"}, we.Node, "the node named is on the cycle")
			}
		})
	}
}

func TestValidateAdded(t *testing.T) {
	t.Parallel()
	existing := []Node{{Ref: "a"}, {Ref: "b", Deps: []string{"a"}}}
	sameAsB := func(ref string) bool { return ref == "b" }
	cases := []struct {
		name     string
		added    []Node
		max      int
		fresh    []string
		node     string
		contains string
	}{
		{"new nodes on existing ones", []Node{{Ref: "c", Deps: []string{"b"}}, {Ref: "d", Deps: []string{"a", "c"}}}, 0, []string{"c", "d"}, "", ""},
		{"the same node again is no change", []Node{{Ref: "b", Deps: []string{"a"}}, {Ref: "c"}}, 0, []string{"c"}, "", ""},
		{"an existing ref with another definition", []Node{{Ref: "a", Deps: []string{"b"}}}, 0, nil, "a", "another definition"},
		{"ref twice among the added", []Node{{Ref: "c"}, {Ref: "c"}}, 0, nil, "c", "twice"},
		{"unknown dep", []Node{{Ref: "c", Deps: []string{"zz"}}}, 0, nil, "c", "not a node"},
		{"cycle among the added", []Node{{Ref: "c", Deps: []string{"d"}}, {Ref: "d", Deps: []string{"c"}}}, 0, nil, "", "cycle"},
		{"past the bound", []Node{{Ref: "c"}, {Ref: "d"}}, 3, nil, "nodes", "would have 4"},
		{"bad ref", []Node{{Ref: "-x"}}, 0, nil, "nodes[0]", "a-z"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fresh, err := ValidateAdded(existing, tc.added, tc.max, sameAsB)
			if tc.contains == "" {
				require.NoError(t, err)
				var refs []string
				for _, n := range fresh {
					refs = append(refs, n.Ref)
				}
				require.Equal(t, tc.fresh, refs)
				return
			}
			var we *Error
			require.ErrorAs(t, err, &we)
			require.Contains(t, we.Reason, tc.contains)
			if tc.node != "" {
				require.Equal(t, tc.node, we.Node)
			}
		})
	}
}
