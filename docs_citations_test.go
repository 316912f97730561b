package dtq_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDocsCiteTheRepo: docs, comments and the changelog cite the repo's own
// documents, never sections of a contract that readers of the repo cannot
// open.
func TestDocsCiteTheRepo(t *testing.T) {
	t.Parallel()
	outside := regexp.MustCompile(`SPEC\s*§|§\s*\d+|\bthe SPEC\b`)
	var found []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".lua", ".py", ".ts", ".mjs", ".js", ".sh", ".yaml", ".json":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if outside.MatchString(line) && !strings.Contains(line, "outside := regexp") {
				found = append(found, fmt.Sprintf("%s:%d", path, i+1))
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, found, "cite docs/ instead")
}
