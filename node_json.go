package dtq

import (
	"encoding/json"
	"fmt"
)

// Node embeds Submission, so without these methods it would take on
// Submission's MarshalJSON and UnmarshalJSON and lose its own fields.

// MarshalJSON writes n in the JSON form of a workflow node, an element of
// "nodes" in the body of POST /api/v1/workflows (docs/http-api.md): its
// submission's form (see Submission.MarshalJSON) with "ref", "deps" and
// "on_dep_failure" beside the submission's fields.
func (n Node) MarshalJSON() ([]byte, error) {
	b, err := n.Submission.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("dtq: writing a node: %w", err)
	}
	for _, f := range []struct {
		key string
		v   any
		set bool
	}{{"ref", n.Ref, n.Ref != ""}, {"deps", n.Deps, n.Deps != nil}, {"on_dep_failure", n.OnDepFailure, n.OnDepFailure != ""}} {
		if !f.set {
			continue
		}
		if m[f.key], err = json.Marshal(f.v); err != nil {
			return nil, fmt.Errorf("dtq: writing a node's %s: %w", f.key, err)
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("dtq: writing a node: %w", err)
	}
	return out, nil
}

// UnmarshalJSON reads n from the form MarshalJSON writes, replacing every
// field of n. A member that cannot be read is a *ValidationError naming it;
// input that is not a JSON object wraps ErrInvalidJSON. The rest is checked
// by Client.SubmitWorkflow.
func (n *Node) UnmarshalJSON(data []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return fmt.Errorf("%w: a node must be an object like {\"ref\": \"a\", \"task_type\": \"echo\"}", ErrInvalidJSON)
	}
	var out Node
	for _, f := range []struct {
		key, want string
		to        any
	}{{"ref", "a string", &out.Ref}, {"deps", "an array of refs", &out.Deps}, {"on_dep_failure", `"fail" or "continue"`, &out.OnDepFailure}} {
		if raw, ok := m[f.key]; ok {
			if err := json.Unmarshal(raw, f.to); err != nil {
				return invalid(f.key, "must be %s", f.want)
			}
			delete(m, f.key)
		}
	}
	rest, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	if err := out.Submission.UnmarshalJSON(rest); err != nil {
		return err
	}
	*n = out
	return nil
}
