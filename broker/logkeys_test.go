package broker

// A source check of the log fields the module writes: a duration or a size
// names its unit in its key, so an operator reading a JSON line does not
// have to know that zerolog writes a Dur as milliseconds.
//
// Invariant: every .Dur("key", …) call outside tests has a key ending in
// "_ms" (zerolog's DurationFieldUnit, left at its default), and every
// integer field whose key is a bare size word ("size", "length") ends in
// "_bytes" instead.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot is the directory holding go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestLogFieldsNameTheirUnits fails on a log field whose key hides its
// unit (on the old code: "delay" in SASL authentication failed and in the
// S3 fault proxy, "size" in upload session opened).
func TestLogFieldsNameTheirUnits(t *testing.T) {
	root := moduleRoot(t)
	bareSize := map[string]bool{"size": true, "length": true}
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "bin" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			key, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			rel, _ := filepath.Rel(root, path)
			at := rel + ":" + strconv.Itoa(fset.Position(call.Pos()).Line)
			switch sel.Sel.Name {
			case "Dur":
				if !strings.HasSuffix(key, "_ms") {
					bad = append(bad, at+": Dur("+strconv.Quote(key)+") names no unit (want _ms)")
				}
			case "Int", "Int64", "Uint64", "Uint32", "Int32":
				if bareSize[key] {
					bad = append(bad, at+": "+sel.Sel.Name+"("+strconv.Quote(key)+") names no unit (want _bytes)")
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Error(b)
	}
}
