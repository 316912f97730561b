package rdb

import "context"

// NodeQueues reads the queue of each of refs in workflow id's nodes hash
// (its q:<ref> field): "" for a ref the workflow does not have.
func (r *RDB) NodeQueues(ctx context.Context, id string, refs []string) ([]string, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	fields := make([]string, len(refs))
	for i, ref := range refs {
		fields[i] = "q:" + ref
	}
	vals, err := r.c.HMGet(ctx, r.keys.WorkflowNodes(id), fields...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(refs))
	for i, v := range vals {
		out[i], _ = v.(string) // nil: no such ref
	}
	return out, nil
}
