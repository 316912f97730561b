// Command scriptgen writes the Go side of the scripts of internal/rdb/lua:
// for each script (its header follows the grammar in header.go), a typed
// KEYS struct, a typed ARGV struct, a Build function that lays both out in
// the header's order, a Decode function and a call method that runs the
// script and decodes the reply into the type the header's
// Returns: line names. The .lua file is the source of truth: a header
// entry renamed, retyped or removed changes the generated structs, and Go
// that does not follow fails to compile.
//
// Usage (go generate in internal/rdb): scriptgen -lua lua -out scripts_gen.go
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

func main() {
	dir := flag.String("lua", "lua", "the directory of the scripts")
	out := flag.String("out", "scripts_gen.go", "the file to write")
	flag.Parse()
	src, err := generateDir(os.DirFS(*dir))
	if err == nil {
		err = os.WriteFile(*out, src, 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scriptgen:", err)
		os.Exit(1)
	}
}

// generateDir reads every script of fsys (helpers, named _*.lua, aside) and
// returns the generated file.
func generateDir(fsys fs.FS) ([]byte, error) {
	names, err := fs.Glob(fsys, "*.lua")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	var headers []*header
	for _, n := range names {
		if strings.HasPrefix(n, "_") {
			continue
		}
		src, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		h, err := parseHeader(strings.TrimSuffix(n, path.Ext(n)), string(src))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		headers = append(headers, h)
	}
	return generate(headers)
}
