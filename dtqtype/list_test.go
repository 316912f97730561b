package dtqtype

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestListResultJSON: a page is written as the API's list answer, and an
// answer reads back into a page.
func TestListResultJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		page ListResult[string]
		want string
	}{
		{"nothing", ListResult[string]{}, `{"items":[],"next_cursor":null}`},
		{"the last page", ListResult[string]{Items: []string{"a"}}, `{"items":["a"],"next_cursor":null}`},
		{"more to come", ListResult[string]{Items: []string{"a", "b"}, NextCursor: "AXQ"}, `{"items":["a","b"],"next_cursor":"AXQ"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tt.page)
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(b))
			p, err := json.Marshal(&tt.page)
			require.NoError(t, err)
			require.Equal(t, string(b), string(p), "a pointer writes the same")
			var back ListResult[string]
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, tt.page.NextCursor, back.NextCursor)
			require.Len(t, back.Items, len(tt.page.Items))
		})
	}
}
