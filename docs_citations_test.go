package dtq_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	for _, path := range repoFiles(t, ".go", ".md", ".lua", ".py", ".ts", ".mjs", ".js", ".sh", ".yaml", ".json") {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			if outside.MatchString(line) && !strings.Contains(line, "outside := regexp") {
				found = append(found, fmt.Sprintf("%s:%d", path, i+1))
			}
		}
	}
	require.Empty(t, found, "cite docs/ instead")
}

// repoFiles lists the repo's files with one of exts, leaving out hidden
// directories and node_modules.
func repoFiles(t *testing.T, exts ...string) []string {
	t.Helper()
	var files []string
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
		if slices.Contains(exts, filepath.Ext(path)) {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// mdLink is a relative Markdown link: [text](target), target without a
// scheme, optionally with #anchor.
var mdLink = regexp.MustCompile(`\]\(([^)\s:]*?)(?:#([^)\s]*))?\)`)

// TestDocsLinksResolve: every relative link of the Markdown documents names a
// file that exists and, with #anchor, a heading of that file (GitHub's
// anchors), so that moving a section between pages cannot break a link.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	pages := repoFiles(t, ".md")
	require.Contains(t, pages, filepath.Join("docs", "workflows.md"))
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		anchors[path] = headingAnchors(string(b))
		return anchors[path]
	}
	var broken []string
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target, anchor := m[1], m[2]
				if target == "" && anchor == "" {
					continue
				}
				file := page
				if target != "" {
					file = filepath.Join(filepath.Dir(page), target)
					if _, err := os.Stat(file); err != nil {
						broken = append(broken, fmt.Sprintf("%s:%d: %s: no such file", page, i+1, target))
						continue
					}
				}
				if anchor == "" || filepath.Ext(file) != ".md" {
					continue
				}
				if !anchorsOf(file)[anchor] {
					broken = append(broken, fmt.Sprintf("%s:%d: %s has no heading #%s", page, i+1, file, anchor))
				}
			}
		}
	}
	require.Empty(t, broken)
}

var (
	headingLine = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	inlineLink  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	notInSlug   = regexp.MustCompile(`[^\p{L}\p{N}\s_-]`)
)

// headingAnchors are the anchors GitHub gives a Markdown file's headings
// (lower case, punctuation dropped, spaces as hyphens, -1, -2 … for
// repeats), and its explicit <a id> anchors. Headings inside code fences
// are skipped.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingLine.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		text := inlineLink.ReplaceAllString(m[1], "$1")
		slug := strings.ReplaceAll(notInSlug.ReplaceAllString(strings.ToLower(text), ""), " ", "-")
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}
