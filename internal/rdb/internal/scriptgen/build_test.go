package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

// stub stands in for internal/rdb around a generated file: the handle, the
// run method and the reply decoders it calls.
const stub = `package rdb

import "context"

type RDB struct{}

type cmd struct{}

func (cmd) Result() (any, error) { return nil, nil }

func (r *RDB) run(context.Context, string, []string, ...any) cmd { return cmd{} }

var scriptExample = "example"

func replyInt(any) (int64, error)             { return 0, nil }
func replyString(any) (string, error)         { return "", nil }
func replyStrings(any) ([]string, error)      { return nil, nil }
func replyTuple(any, int, int) ([]any, error) { return nil, nil }
`

// use is Go code that fills in example.lua's structs as its header names
// them today.
const use = `package rdb

import "context"

func use(r *RDB) (string, error) {
	v, err := r.callExample(context.Background(),
		&exampleKeys{Lease: "l", Bands: []string{"a", "b", "c"}, Tasks: []string{"t"}, Outbox: "o"},
		&exampleArgs{Now: 1, WorkerID: "w", Max: 2, Leases: []exampleLeasesItem{{ID: "t", Attempt: 1}}})
	return v.State, err
}
`

// TestHeaderChangeBreaksTheBuild: Go that fills in a script's structs
// builds against the file generated from its header, and no longer does
// once the header renames an entry, retypes one or changes the reply.
func TestHeaderChangeBreaksTheBuild(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/example.lua")
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		edits []string // old, new pairs
		fails string   // in the compiler's output; "" = the build passes
	}{
		{"unchanged", nil, ""},
		{"an entry renamed", []string{"ARGV[2] worker_id:", "ARGV[2] worker:"}, "WorkerID"},
		{"an entry retyped", []string{"ARGV[1] now int64:", "ARGV[1] now:"}, "as string value"},
		{"a key removed", []string{"-- KEYS[5 + 1*n] outbox: workflow outbox stream, after\n--   the tasks' keys\n", "",
			"KEYS[6 + 1*n]", "KEYS[5 + 1*n]", "KEYS[7 + 1*n]", "KEYS[6 + 1*n]"}, "Outbox"},
		{"the reply changed", []string{"Returns: {state string,", "Returns: {status string,"}, "State"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			header := string(src)
			for i := 0; i < len(tc.edits); i += 2 {
				require.Contains(t, header, tc.edits[i])
			}
			header = strings.NewReplacer(tc.edits...).Replace(header)
			gen, err := generateDir(fstest.MapFS{"example.lua": {Data: []byte(header)}})
			require.NoError(t, err)
			out, err := build(t, map[string]string{"scripts_gen.go": string(gen), "stub.go": stub, "use.go": use})
			if tc.fails == "" {
				require.NoError(t, err, out)
				return
			}
			require.Error(t, err, "the build passed after the header changed")
			require.Contains(t, out, "use.go")
			require.Contains(t, out, tc.fails)
		})
	}
}

// build compiles files as one package of a module of their own and returns
// the compiler's output.
func build(t *testing.T, files map[string]string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	files["go.mod"] = "module example.com/rdb\n\ngo 1.24\n"
	for name, src := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600))
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
