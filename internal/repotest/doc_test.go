// Package repotest holds tests of repository-wide invariants.
package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// TestExportedIdentifiersAreDocumented enforces that every exported
// identifier of every non-test file carries a doc comment, and that every
// package has a package comment.
func TestExportedIdentifiersAreDocumented(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	pkgDoc := map[string]bool{}
	var missing []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.Dir(rel)
		if _, seen := pkgDoc[dir]; !seen {
			pkgDoc[dir] = false
		}
		if f.Doc != nil {
			pkgDoc[dir] = true
		}
		if strings.HasSuffix(path, ".pb.go") || strings.Contains(path, "_grpc.pb.go") {
			return nil // generated
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Doc != nil {
					continue
				}
				if d.Recv != nil && !exportedRecv(d.Recv) {
					continue
				}
				if d.Recv != nil && isInterfaceMethodImpl(d.Name.Name) {
					continue
				}
				missing = append(missing, fset.Position(d.Pos()).String()+" func "+d.Name.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
							missing = append(missing, fset.Position(s.Pos()).String()+" type "+s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
								missing = append(missing, fset.Position(n.Pos()).String()+" "+n.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range missing {
		t.Errorf("undocumented exported identifier: %s", m)
	}
	for dir, ok := range pkgDoc {
		if !ok {
			t.Errorf("package in %s has no package comment", dir)
		}
	}
}

func exportedRecv(fl *ast.FieldList) bool {
	if len(fl.List) == 0 {
		return false
	}
	typ := fl.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

// isInterfaceMethodImpl names methods whose meaning is fixed by a
// well-known interface (error, fmt.Stringer, json.Marshaler, sealed
// interfaces of this module), which need no comment of their own.
func isInterfaceMethodImpl(name string) bool {
	switch name {
	case "Error", "String", "GoString", "Unwrap", "Is", "MarshalJSON", "UnmarshalJSON", "LogValue",
		"BlockType", "Type", "Blocks", "Text", "Read", "Write", "Close", "ServeHTTP":
		return true
	}
	return false
}
