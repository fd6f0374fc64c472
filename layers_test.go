package main

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// layers orders the server's files from the top (main) to the bottom (the
// system). A file may name what is declared in its own layer or below it,
// never above: so each layer can be read, tested and replaced on its own.
// A new file gets a row here; the test fails until it has one.
var layers = [][]string{
	{"main.go"},
	{"stdio.go", "http.go"}, // the transports: one session on stdin/stdout; sessions over HTTP
	{"server.go"},           // what is process-wide: sessions, signals, shutdown
	{"rpc.go", "era.go"},    // a session: JSON-RPC framing, dispatch, replies; the protocol revisions
	{"toolsets.go", "tools.go", "exectool.go", "shelltools.go"}, // the tool sets; the tool tables and handlers: jobs, exec, shell
	{"budget.go"},           // cutting results to a reply budget
	{"results.go"},          // the wire form of results
	{"shellview.go"},        // the Shell toolkit's view of a stream
	{"args.go"},             // typed tool arguments and their schemas
	{"kill.go", "until.go"}, // kill and teardown of a job's process group; a wait ending early
	{"jobs.go", "spawn.go", "expiry.go", "inputwait.go"}, // the registry: starting, waiting, delivery; a job's launch: pipes, terminal, env, cwd; expiry; input wanted
	{"room.go"},                 // room for another job: slots, descriptors, processes
	{"policy.go"},               // what a job may run, where and with what
	{"sandbox.go"},              // the launcher that confines a job before it runs
	{"stdin.go"},                // a job's stdin pipe
	{"pump.go"},                 // copying a job's output pipes, settling at exit
	{"config.go"},               // settings from the environment
	{"window.go"},               // the bounded output window
	{"reaper.go"},               // the one owner of child exit statuses
	{"specs.go"},                // stream, capture and signal specs
	{"memory.go", "metrics.go"}, // handing memory back when idle; process-wide counters
	{"wake.go"},                 // waiting with deadlines, waking without blocking
	{"json.go"},                 // JSON decoding and escaping helpers
	{"errors.go", "log.go"},
	{"sys.go", "sys_linux.go", "sys_other.go", "confine.go", "confine_linux.go", "confine_other.go",
		"isolate_linux.go", "seccomp_linux.go"}, // the kernel's layers a confined job's thread takes on
}

// TestLayersPointDown type-checks the package and fails on every reference
// from a file to something declared in a file of a higher layer. The check
// runs in a re-executed test binary: type-checking runs `go list`, whose
// exit status this process's reaper would otherwise collect first.
func TestLayersPointDown(t *testing.T) {
	onLinux(t)
	code, out := runChild(t, append(os.Environ(), childModeEnv+"=layers"))
	if code != 0 {
		t.Fatalf("type-check (exit %d): %s", code, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line != "" {
			t.Error(line)
		}
	}
}

func init() {
	childModes["layers"] = func() int {
		upward, err := upwardReferences()
		if err != nil {
			fmt.Println(err)
			return 2
		}
		for _, msg := range upward {
			fmt.Println(msg)
		}
		return 0
	}
}

// upwardReferences lists every reference from a file to something declared
// in a higher layer, and every file without a row in layers.
func upwardReferences() ([]string, error) {
	rank := map[string]int{}
	for i, files := range layers {
		for _, f := range files {
			rank[f] = i
		}
	}
	paths, err := filepath.Glob("*.go")
	if err != nil {
		return nil, err
	}
	var problems []string
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, "_other.go") {
			continue // a _other.go file is the other platforms' twin of a _linux.go one
		}
		if _, ok := rank[p]; !ok {
			problems = append(problems, p+" has no row in layers: say which layer it belongs to")
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("main", fset, files, info)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to || rank[from] <= rank[to] || isLocal(obj, pkg) {
			continue
		}
		msg := from + " names " + obj.Name() + " from " + to + ", a layer above it"
		if !seen[msg] {
			seen[msg] = true
			problems = append(problems, msg)
		}
	}
	return problems, nil
}

// isLocal reports whether obj is declared inside a function (a parameter,
// a local variable or type), which no other file can name.
func isLocal(obj types.Object, pkg *types.Package) bool {
	if v, ok := obj.(*types.Var); ok && v.IsField() {
		return false
	}
	if f, ok := obj.(*types.Func); ok {
		return f.Parent() != nil && f.Parent() != pkg.Scope() && f.Type().(*types.Signature).Recv() == nil
	}
	return obj.Parent() != nil && obj.Parent() != pkg.Scope()
}
