package services

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds a function's length, literals included: past it a
// function does several jobs that want names of their own.
const maxFuncLines = 120

// No function of the project's code (tests aside) runs over maxFuncLines
// lines, from its signature to its closing brace.
func TestNoFunctionIsTooLong(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, root := range []string{"../contracts", "../events", "../infra", "."} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			checked++
			ast.Inspect(f, func(n ast.Node) bool {
				var body *ast.BlockStmt
				name := "a function literal"
				switch fn := n.(type) {
				case *ast.FuncDecl:
					body, name = fn.Body, fn.Name.Name
				case *ast.FuncLit:
					body = fn.Body
				}
				if body == nil {
					return true
				}
				start := fset.Position(n.Pos())
				if lines := fset.Position(body.Rbrace).Line - start.Line + 1; lines > maxFuncLines {
					t.Errorf("%s:%d: %s has %d lines, more than %d: split it", path, start.Line, name, lines, maxFuncLines)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d files checked: is the test run from services/?", checked)
	}
}
