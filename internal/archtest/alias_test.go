package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoExportedAliases: one type per concept, named where it lives. No
// hand-written file (generated and test files are exempt) declares an
// exported type alias of another package's type (type X = pkg.Y), nor an
// exported var or const whose value is just an exported name of another of
// the module's packages (X = pkg.Y): a caller names the owning package's
// identifier instead. A value taken from outside the module (a default of
// time.Minute, say) is a concept of its own and may stay.
func TestNoExportedAliases(t *testing.T) {
	t.Parallel()
	dir := root(t)
	var bad []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "tools" || name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".") && path != dir {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		for _, a := range exportedAliases(f) {
			pos := fset.Position(a.pos)
			bad = append(bad, rel+":"+strconv.Itoa(pos.Line)+": "+a.what)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("%s; use the owning package's name and delete the alias", b)
	}
}

type alias struct {
	pos  token.Pos
	what string
}

// exportedAliases is the file's top-level exported declarations that only
// rename another package's exported identifier.
func exportedAliases(f *ast.File) []alias {
	imports := importNames(f)
	var out []alias
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range gd.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if !s.Assign.IsValid() || !s.Name.IsExported() {
					continue
				}
				if pkg, name, ok := qualified(s.Type, imports); ok {
					out = append(out, alias{s.Pos(), "type " + s.Name.Name + " = " + pkg + "." + name})
				}
			case *ast.ValueSpec:
				for i, n := range s.Names {
					if !n.IsExported() || i >= len(s.Values) {
						continue
					}
					pkg, name, ok := qualified(s.Values[i], imports)
					if ok && strings.HasPrefix(imports[pkg], module+"/") {
						out = append(out, alias{n.Pos(), gd.Tok.String() + " " + n.Name + " = " + pkg + "." + name})
					}
				}
			}
		}
	}
	return out
}

// qualified reports whether e is pkg.Name (or a generic instance of it)
// for an imported pkg and an exported Name.
func qualified(e ast.Expr, imports map[string]string) (pkg, name string, ok bool) {
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	sel, isSel := e.(*ast.SelectorExpr)
	if !isSel || !sel.Sel.IsExported() {
		return "", "", false
	}
	id, isID := sel.X.(*ast.Ident)
	if !isID {
		return "", "", false
	}
	if _, imported := imports[id.Name]; !imported {
		return "", "", false
	}
	return id.Name, sel.Sel.Name, true
}

// importNames maps the name each import is known by in the file to its path.
func importNames(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "_" || name == "." {
			continue
		}
		m[name] = p
	}
	return m
}
