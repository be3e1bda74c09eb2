package layout_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pkg is what go list says of one package.
type pkg struct {
	ImportPath string
	Dir        string
	Doc        string
	GoFiles    []string
	Deps       []string
}

// packages lists the module's packages with go list.
func packages(t *testing.T) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	cmd := exec.Command(goBin, "list", "-json", "./...")
	cmd.Dir = "../.." // the module root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list listed %d packages; is the module root ../..?", len(pkgs))
	}
	return pkgs
}

// TestEveryPackageHasADoc: go doc has something to say of every package,
// test-only ones included (they keep their doc in a doc.go).
func TestEveryPackageHasADoc(t *testing.T) {
	for _, p := range packages(t) {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("%s has no package doc comment: add one (a doc.go for a package of tests only)", p.ImportPath)
		}
	}
}

// generated matches the marker of a generated file.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestPackageDocsAreWhole: in a file with a package doc comment, no other
// comment stands between the top of the file and the package clause (a
// build constraint aside). Such a comment is usually a paragraph of the
// manual cut off by a stray blank line, and go doc does not show it.
func TestPackageDocsAreWhole(t *testing.T) {
	for _, p := range packages(t) {
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			if f.Doc == nil || generatedFile(f) {
				continue
			}
			for _, c := range f.Comments {
				if c == f.Doc || c.Pos() > f.Package || buildConstraint(c) {
					continue
				}
				t.Errorf("%s: a comment at line %d is cut off from the package doc by a blank line; go doc does not show it",
					path, fset.Position(c.Pos()).Line)
			}
		}
	}
}

// generatedFile reports whether f is marked as generated.
func generatedFile(f *ast.File) bool {
	for _, c := range f.Comments {
		for _, l := range c.List {
			if generated.MatchString(l.Text) {
				return true
			}
		}
	}
	return false
}

// buildConstraint reports whether c is only build constraints.
func buildConstraint(c *ast.CommentGroup) bool {
	for _, l := range c.List {
		if !strings.HasPrefix(l.Text, "//go:build") && !strings.HasPrefix(l.Text, "// +build") {
			return false
		}
	}
	return true
}

const module = "github.com/setpointhq/setpoint"

// TestImportsPointInward checks the import rules of STYLE.md's layout that
// engine/deps_test.go and agent/imports_test.go do not: the target package
// knows the engine alone of this module; the API conversion and the engine
// know nothing of the store; the store knows nothing of the server; the
// server's rooms (server/admission, server/watch, server/fleets) know nothing of package server, which
// wires them; the fleet package knows the engine and the target package
// alone, and nothing outside the module but the standard library.
func TestImportsPointInward(t *testing.T) {
	rules := []struct {
		pkg     string
		allowed func(dep string) bool
		// stdOnly: no dependency outside the module but the standard library.
		stdOnly bool
	}{
		{"target", func(dep string) bool { return dep == "engine" }, false},
		{"server/convert", func(dep string) bool { return dep != "store" && !strings.HasPrefix(dep, "store/") }, false},
		{"store", func(dep string) bool { return dep != "server" && !strings.HasPrefix(dep, "server/") }, false},
		{"server/admission", func(dep string) bool { return dep != "server" }, false},
		{"server/watch", func(dep string) bool { return dep != "server" }, false},
		{"server/fleets", func(dep string) bool { return dep != "server" }, false},
		{"fleet", func(dep string) bool { return dep == "engine" || dep == "target" }, true},
	}
	pkgs := map[string]pkg{}
	for _, p := range packages(t) {
		pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = p
	}
	for _, r := range rules {
		p, ok := pkgs[r.pkg]
		if !ok {
			t.Errorf("package %s not found", r.pkg)
			continue
		}
		for _, dep := range p.Deps {
			rel, ours := strings.CutPrefix(dep, module+"/")
			first, _, _ := strings.Cut(dep, "/")
			if ours && !r.allowed(rel) || !ours && r.stdOnly && strings.Contains(first, ".") {
				t.Errorf("%s depends on %s", r.pkg, rel)
			}
		}
	}
}
