// Package archtest checks the structure the code must keep, where a check
// can see it: the store is the only door to PostgreSQL, the assembly core is
// pure by construction, every operation of the contract declares its
// permission, no hand-written function grows past 100 lines, and no package
// re-exports another's names under aliases. It runs with the rest of the
// suite, so a change that breaks a rule fails CI.
package archtest

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const module = "github.com/contextd/contextd"

// root is the module's directory (this package is internal/archtest).
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", dir, err)
	}
	return dir
}

func goList(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// dbDoors may import pgx: the store, the test harness (which hands tests a
// pool on a database of their own), the embedded cluster (which must
// talk to a server before any store exists) and the bench, whose floor is a
// raw pgx program with SQL of its own: the lower bound contextd's assembly
// is measured against must not go through the store it measures.
var dbDoors = []string{
	module + "/internal/store",
	module + "/internal/pgtest",
	module + "/internal/pgcluster",
	module + "/internal/bench", // the floor of `contextd bench`; its own code never imports internal/store
}

func isDoor(pkg string) bool {
	for _, d := range dbDoors {
		if pkg == d || strings.HasPrefix(pkg, d+"/") {
			return true
		}
	}
	return false
}

// TestStoreIsTheOnlyDoor: outside the store (harness and embedded cluster
// aside), no package's own code imports pgx or the generated queries.
func TestStoreIsTheOnlyDoor(t *testing.T) {
	t.Parallel()
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(goList(t, "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || isDoor(fields[0]) {
			continue
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/jackc/pgx") || strings.Contains(imp, "/dbsqlc") {
				bad = append(bad, fields[0]+" imports "+imp)
			}
		}
	}
	if len(bad) > 0 {
		t.Errorf("only internal/store may import pgx or the generated code:\n%s", strings.Join(bad, "\n"))
	}
}

// TestPureCore: the assembly pipeline and the renderers depend on no
// database, store, HTTP or Echo code, so they cannot do I/O by accident.
func TestPureCore(t *testing.T) {
	t.Parallel()
	deps := goList(t, "-deps", "./internal/assemble", "./internal/render", "./internal/audit", "./internal/attribute", "./internal/kxm", "./internal/navi", "./internal/footprint", "./internal/strictjson")
	var bad []string
	for _, dep := range strings.Fields(deps) {
		switch {
		case strings.HasPrefix(dep, "github.com/jackc/pgx"),
			strings.HasPrefix(dep, "github.com/labstack/echo"),
			dep == "net/http",
			strings.HasPrefix(dep, module+"/internal/store"):
			bad = append(bad, dep)
		}
	}
	if len(bad) > 0 {
		t.Errorf("internal/assemble, internal/render, internal/audit, internal/attribute, internal/kxm, internal/navi, internal/footprint and internal/strictjson must stay pure; their dependencies include:\n%s", strings.Join(bad, "\n"))
	}
}

// maxFuncLines is the longest a hand-written function may be.
const maxFuncLines = 100

// TestShortFunctions: no hand-written function is longer than
// maxFuncLines; generated files (marked "Code generated") are exempt.
func TestShortFunctions(t *testing.T) {
	t.Parallel()
	type fn struct {
		name  string
		lines int
	}
	var long []fn
	longest := fn{}
	err := filepath.WalkDir(root(t), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "tools" || name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".") && path != root(t) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, _ := filepath.Rel(root(t), path)
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			name := rel + ":" + fd.Name.Name
			if n > longest.lines {
				longest = fn{name, n}
			}
			if n > maxFuncLines {
				long = append(long, fn{name, n})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("longest hand-written function: %s, %d lines", longest.name, longest.lines)
	sort.Slice(long, func(i, j int) bool { return long[i].lines > long[j].lines })
	for _, f := range long {
		t.Errorf("%s is %d lines; split it (at most %d)", f.name, f.lines, maxFuncLines)
	}
}

// TestEveryOperationDeclaresItsPermission: every operation of
// api/openapi.yaml carries x-contextd-permission, one of public, read, edit
// or admin; the permission middleware enforces it from the spec.
func TestEveryOperationDeclaresItsPermission(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(root(t), "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Paths map[string]map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	methods := map[string]bool{"get": true, "put": true, "post": true, "delete": true, "patch": true, "head": true, "options": true}
	n := 0
	for path, ops := range spec.Paths {
		for method, op := range ops {
			if !methods[method] {
				continue
			}
			n++
			perm, _ := op["x-contextd-permission"].(string)
			switch perm {
			case "public", "read", "edit", "admin":
			default:
				t.Errorf("%s %s: x-contextd-permission is %q; want public, read, edit or admin", strings.ToUpper(method), path, perm)
			}
		}
	}
	if n == 0 {
		t.Fatal("no operations found in api/openapi.yaml")
	}
	t.Logf("%d operations", n)
}
