package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// txWrites are the service writes that have a form running in the
// caller's transaction: the names X of every `func (s *Service) XTx(`
// under internal/.
func txWrites(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(filepath.Join(root(t), "internal"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !strings.HasSuffix(fn.Name.Name, "Tx") || len(fn.Name.Name) == 2 {
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Service" {
					out[strings.TrimSuffix(fn.Name.Name, "Tx")] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// serviceCall is the method name of a call s.<field>.<Method>(...), or "".
func serviceCall(call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	inner, ok := sel.X.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if id, ok := inner.X.(*ast.Ident); !ok || id.Name != "s" {
		return ""
	}
	return sel.Sel.Name
}

// isCallTo reports whether call is s.<name>(...) or <name>(...).
func isCallTo(e ast.Expr, name string) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name == name
	case *ast.SelectorExpr:
		id, ok := f.X.(*ast.Ident)
		return ok && id.Name == "s" && f.Sel.Name == name
	}
	return false
}

// unitViolations walks a handler file: a service write's ...Tx form must
// be called inside a function literal passed to s.write (the request's
// unit of work, which an Idempotency-Key's stored answer joins), and its
// own-transaction form only in the else branch of `if inUnit(ctx)`.
func unitViolations(fset *token.FileSet, f *ast.File, writes map[string]bool) []string {
	var bad []string
	var walk func(n ast.Node, inWrite, outsideUnit bool)
	walk = func(n ast.Node, inWrite, outsideUnit bool) {
		ast.Inspect(n, func(c ast.Node) bool {
			switch c := c.(type) {
			case *ast.IfStmt:
				if isCallTo(c.Cond, "inUnit") {
					walk(c.Body, inWrite, false)
					if c.Else != nil {
						walk(c.Else, inWrite, true)
					}
					return false
				}
			case *ast.CallExpr:
				if isCallTo(c, "write") {
					for _, a := range c.Args {
						walk(a, true, outsideUnit)
					}
					return false
				}
				m := serviceCall(c)
				switch {
				case strings.HasSuffix(m, "Tx") && writes[strings.TrimSuffix(m, "Tx")] && !inWrite:
					bad = append(bad, fset.Position(c.Pos()).String()+": "+m+" outside s.write")
				case writes[m] && !outsideUnit:
					bad = append(bad, fset.Position(c.Pos()).String()+": "+m+" runs a transaction of its own; call "+m+"Tx inside s.write")
				}
			}
			return true
		})
	}
	walk(f, false, false)
	return bad
}

// TestHandlersWriteThroughTheUnitOfWork: a handler's write goes through
// s.write, so that a request with an Idempotency-Key stores its effect
// and its answer in one transaction; a write that runs its own
// transaction (item PUT's group commit) does so only where no unit is.
func TestHandlersWriteThroughTheUnitOfWork(t *testing.T) {
	t.Parallel()
	writes := txWrites(t)
	if !writes["Put"] || !writes["Create"] {
		t.Fatalf("the service writes were not found (got %v)", writes)
	}
	dir := filepath.Join(root(t), "internal", "server")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		bad = append(bad, unitViolations(fset, f, writes)...)
	}
	if len(bad) > 0 {
		t.Errorf("handlers must write through the unit of work:\n%s", strings.Join(bad, "\n"))
	}
}

// TestUnitRuleCatchesAWriteOutsideTheUnit: the rule flags both mistakes.
func TestUnitRuleCatchesAWriteOutsideTheUnit(t *testing.T) {
	t.Parallel()
	src := `package server
func (s *Server) A(ctx context.Context) { s.items.PutTx(ctx, nil) }
func (s *Server) B(ctx context.Context) { s.items.Delete(ctx) }
func (s *Server) C(ctx context.Context) {
	if inUnit(ctx) {
		s.write(ctx, func(tx *store.Tx) error { _, err := s.items.PutTx(ctx, tx); return err })
	} else {
		s.items.Put(ctx)
	}
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	bad := unitViolations(fset, f, map[string]bool{"Put": true, "Delete": true})
	if len(bad) != 2 || !strings.Contains(bad[0], "PutTx outside s.write") || !strings.Contains(bad[1], "Delete runs a transaction of its own") {
		t.Errorf("want the two mistakes of A and B flagged, got %v", bad)
	}
}
