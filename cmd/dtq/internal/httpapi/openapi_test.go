package httpapi

import (
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	res := b.do(t, http.MethodGet, "/api/v1/openapi.json", "") // open: no key needed
	require.Equal(t, http.StatusOK, res.status)
	require.Equal(t, "application/json", res.header.Get("Content-Type"))

	var doc struct {
		OpenAPI    string                                `json:"openapi"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			SecuritySchemes map[string]json.RawMessage `json:"securitySchemes"`
			Schemas         map[string]json.RawMessage `json:"schemas"`
			Parameters      map[string]json.RawMessage `json:"parameters"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(res.body, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	require.Contains(t, doc.Components.SecuritySchemes, "bearerAuth")
	require.Contains(t, doc.Components.SecuritySchemes, "apiKeyHeader")
	for _, s := range []string{"Task", "Error", "ErrorCode", "SubmitRequest", "BatchRequest", "BatchResponse", "TaskList",
		"QueueInfo", "WorkerInfo", "DLQEntry", "AuditEntry", "MinuteStats", "BulkResult"} {
		require.Contains(t, doc.Components.Schemas, s)
	}

	var params map[string]struct {
		Name string `json:"name"`
		In   string `json:"in"`
	}
	raw, err := json.Marshal(doc.Components.Parameters)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &params))

	served := map[string]bool{}
	for _, rt := range b.api.routes {
		ops, ok := doc.Paths[rt.pattern]
		require.True(t, ok, "openapi.json lacks path %s", rt.pattern)
		require.Contains(t, ops, strings.ToLower(rt.method), "openapi.json lacks %s %s", rt.method, rt.pattern)
		served[strings.ToLower(rt.method)+" "+rt.pattern] = true

		// Every {name} of the pattern is a documented path parameter.
		var op struct {
			Parameters []struct {
				Ref  string `json:"$ref"`
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		}
		require.NoError(t, json.Unmarshal(ops[strings.ToLower(rt.method)], &op))
		var inPath []string
		for _, p := range op.Parameters {
			if p.Ref != "" {
				ref := params[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				require.NotEmpty(t, ref.Name, "dangling %s", p.Ref)
				p.Name, p.In = ref.Name, ref.In
			}
			if p.In == "path" {
				inPath = append(inPath, p.Name)
			}
		}
		var want []string
		for _, m := range regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(rt.pattern, -1) {
			want = append(want, m[1])
		}
		require.ElementsMatch(t, want, inPath, "path parameters of %s %s", rt.method, rt.pattern)
	}
	// Nothing documented that the mux does not serve.
	for path, ops := range doc.Paths {
		for method := range ops {
			require.True(t, served[method+" "+path], "openapi.json documents %s %s, which is not served", method, path)
		}
	}

	// The document lists every error code the package answers with.
	var codes struct {
		Enum []string `json:"enum"`
	}
	require.NoError(t, json.Unmarshal(doc.Components.Schemas["ErrorCode"], &codes))
	src, err := os.ReadFile("errors.go")
	require.NoError(t, err)
	for _, m := range regexp.MustCompile(`code\w+\s+= "([A-Z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		require.True(t, slices.Contains(codes.Enum, m[1]), "ErrorCode enum lacks %s", m[1])
	}
}

// TestOpenAPIEveryOperationSucceedsAndRefuses holds openapi.json to the
// linters' rule that every operation documents a 2xx and a 4xx answer
// (redocly's operation-2xx-response and operation-4xx-response). The only
// exceptions are the accepted findings of the repository's
// .redocly.lint-ignore.yaml, each with its reason there (a probe that
// refuses nothing, a WebSocket handshake that succeeds with 101): an
// operation missing either answer must be given the answer the server
// really sends, or be listed there with the reason.
func TestOpenAPIEveryOperationSucceedsAndRefuses(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]json.RawMessage `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openapiJSON, &doc))
	missing := map[string][]string{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			at := "#/paths/" + escapePointer(path) + "/" + method + "/responses"
			for class, rule := range map[byte]string{'2': "operation-2xx-response", '4': "operation-4xx-response"} {
				if !slices.ContainsFunc(slices.Collect(maps.Keys(op.Responses)), func(code string) bool { return code[0] == class }) {
					missing[rule] = append(missing[rule], at)
				}
			}
		}
	}
	accepted := lintIgnored(t, "../../../../.redocly.lint-ignore.yaml", "cmd/dtq/internal/httpapi/openapi.json")
	for _, rule := range []string{"operation-2xx-response", "operation-4xx-response"} {
		require.ElementsMatch(t, accepted[rule], missing[rule],
			"operations without a %s answer, against the accepted ones of .redocly.lint-ignore.yaml", rule[len("operation-"):len("operation-")+3])
	}
}

// lintIgnored reads the findings a redocly ignore file accepts for file:
// rule → JSON pointers.
func lintIgnored(t *testing.T, path, file string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string][]string{}
	var inFile bool
	var rule string
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
		case !strings.HasPrefix(line, " "):
			inFile = strings.TrimSuffix(trimmed, ":") == file
		case !inFile:
		case strings.HasPrefix(trimmed, "- "):
			out[rule] = append(out[rule], strings.Trim(strings.TrimPrefix(trimmed, "- "), `'"`))
		default:
			rule = strings.TrimSuffix(trimmed, ":")
		}
	}
	require.NotEmpty(t, out, "%s accepts no finding of %s", path, file)
	return out
}
