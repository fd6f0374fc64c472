package main

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// transports are the files that carry messages between a client and a
// session: they read requests, hand them to a session and write what it
// answers. They name nothing in coreFiles.
var transports = []string{"stdio.go", "http.go"}

// coreFiles are the job core: starting a process, its output window and
// pumps, kill and teardown, reaping, stdin, waits that end early and the
// system calls beneath them. A transport reaches a job only through the
// session and tool layers. A file split out of one of these belongs here
// too: add it, or the transports may name it unchecked.
var coreFiles = []string{
	"jobs.go", "linger.go", "window.go", "windowmemory.go", "grep.go", "highlight.go", "mask.go", "pump.go", "kill.go", "reaper.go", "stdin.go", "until.go",
	"spill.go", "sys.go", "sys_linux.go", "sys_waitset_linux.go", "tree.go", "sys_tree_linux.go",
	"cgroup.go", "cgroup_linux.go", "cgroup_other.go", "cgroup_escape_linux.go", "jobpids_linux.go", "sys_sockets_linux.go",
}

// layers orders the server's files from the top (main) to the bottom (the
// system). A file may name what is declared in its own layer or below it,
// never above: so each layer can be read, tested and replaced on its own.
// A new file gets a row here; the test fails until it has one.
var layers = [][]string{
	{"main.go"},
	{"cli.go"},      // the command line: options, usage errors, the terminal hint
	transports,      // one session on stdin/stdout; sessions over HTTP
	{"httpconn.go"}, // whether an HTTP client is still there to read its reply
	{"rawconn.go"},  // a connection's descriptor, for the transports' system calls
	// The HTTP listener's guards: bound address, generated token, Host, pending connections.
	{"httpguard.go"},
	// No job is a client of its own server: a connection's client, looked up once.
	{"httppeer.go"},
	{"server.go"},   // what is process-wide: sessions, signals, shutdown
	{"rpc.go"},      // a session: dispatch, replies, notifications
	{"tasks.go"},    // MCP tasks: a long call the client polls, in both revisions' forms
	{"era.go"},      // the protocol revisions and the shapes of their replies
	{"jsonrpc.go"},  // JSON-RPC framing: lines, messages, error codes
	{"toolsets.go"}, // the tool sets a configuration offers, and their tools/list
	{"describe.go"}, // the limits and policy in force, in words for descriptions
	{"jobtools.go", "exectool.go", "shelltools.go", "execstream.go"}, // the tool contracts: jobs, exec, shell, the streamed exec
	{"lifecycle.go"},        // running a job for a call, from its start to its result
	{"call.go"},             // a tool call: its arguments, reply budget and result
	{"dialect.go"},          // how one request is answered: era, tasks, profile
	{"budget.go"},           // cutting results to a reply budget
	{"results.go"},          // the wire form of results
	{"recent.go"},           // a running job's newest lines: a prompt, or progress
	{"shellview.go"},        // the Shell toolkit's view of a stream
	{"argshints.go"},        // an unknown argument's nearest accepted names, for a model
	{"args.go"},             // typed tool arguments and their schemas
	{"kill.go", "until.go"}, // kill and teardown of a job's tree; a wait ending early
	{"jobs.go"},             // the registry: starting, waiting, delivery, expiry
	{"joblog.go"},           // the job log: a line per start, end and refusal
	{"linger.go"},           // what keeps a delivered job whose tree runs: the set, the look at its tree
	{"spawn.go", "inputwait.go", "expiry.go"}, // a job's launch: pipes, terminal, env, cwd; input wanted; forgotten ids
	// Every process of the server's jobs: its tree, its cgroups' members.
	{"jobpids_linux.go", "jobpids_other.go"},
	{"job.go"},          // one job: its group, windows, pumps and outcome
	{"trace.go"},        // a call's W3C trace context, as its jobs' variables
	{"room.go"},         // room for another job: slots, descriptors, processes
	{"cwd.go"},          // the working directory a session keeps between calls
	{"policy.go"},       // what a job may run, where and with what
	{"sandbox.go"},      // the launcher that confines a job before it runs
	{"stdin.go"},        // a job's stdin pipe
	{"pump.go"},         // copying a job's output pipes, settling at exit
	{"process.go"},      // what the process owns once: window memory, counters, temporary directories
	{"config.go"},       // settings from the environment
	{"mask.go"},         // secrets masked where output enters: the rules, the stream's masker
	{"highlight.go"},    // the lines of a result's gap that look like a failure
	{"grep.go"},         // the complete lines of a window, and searching them
	{"windowmemory.go"}, // what all windows hold together, and its bound
	{"window.go"},       // the bounded output window
	{"spill.go"},        // where the bytes a window lets go are kept on disk
	{"tree.go"},         // what ties processes outside its group to a job: its pipes, earlier looks
	{"reaper.go"},       // the one owner of child exit statuses
	{"cgroup.go", "cgroup_linux.go", "cgroup_other.go", "cgroup_escape_linux.go"}, // a job's cgroup: made, watched, frozen, killed, counted, removed; what left it
	{"specs.go"},                // stream, capture and signal specs
	{"memory.go", "metrics.go"}, // handing memory back when idle; process-wide counters
	{"wake.go"},                 // waiting with deadlines, waking without blocking
	{"handoff.go"},              // what a call delivered, until its reply reaches the client
	{"json.go"},                 // JSON decoding and escaping helpers
	{"errors.go", "log.go", "ids.go", "version.go"}, // version.go: the release number, from VERSION
	{"sys_waitset_linux.go"},                        // what a job's process sleeps waiting to read: its stdin, or a set holding it
	{"sys.go", "sys_linux.go", "sys_other.go", "sys_tree_linux.go", "confine.go", "confine_linux.go", "confine_other.go",
		"isolate_linux.go", "seccomp_linux.go", "conn_linux.go", "conn_other.go",
		"sys_sockets_linux.go", "sys_sockets_other.go"}, // the kernel's layers a confined job's thread takes on
}

// TestLayersPointDown fails on every file without a row in layers and on
// every reference from a file to something declared in a higher layer.
func TestLayersPointDown(t *testing.T) {
	g := packageGraph(t)
	reportProblems(t, append(unrankedFiles(g, layers), upwardReferences(g, layers)...))
}

// TestLayersNoTwoWayPairs fails on every two files that each name something
// the other declares, even within one layer.
func TestLayersNoTwoWayPairs(t *testing.T) {
	reportProblems(t, twoWayPairs(packageGraph(t)))
}

// TestLayersNoCycles fails on every ring of three or more files that reach
// each other by their references (a ring of two is a two-way pair).
func TestLayersNoCycles(t *testing.T) {
	reportProblems(t, fileCycles(packageGraph(t)))
}

// TestLayersTransportsSkipTheCore fails on every reference from a transport
// to a file of the job core, and on a listed file the package lacks (a
// renamed core file would otherwise leave the rule checking nothing).
func TestLayersTransportsSkipTheCore(t *testing.T) {
	g := packageGraph(t)
	problems := missingFiles(g, "transports", transports)
	problems = append(problems, missingFiles(g, "coreFiles", coreFiles)...)
	reportProblems(t, append(problems, transportsReachingCore(g, transports, coreFiles)...))
}

// reportProblems fails t once for each problem, so each says what to move.
func reportProblems(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

// fileGraph is the package's references between its files: refs[from][to]
// lists, sorted, the names declared in file to that file from uses (a
// method or field with its type: job.outcome).
type fileGraph struct {
	files []string // every file type-checked, sorted
	refs  map[string]map[string][]string
}

// addRef records that from names name, declared in to.
func (g *fileGraph) addRef(from, to, name string) {
	if g.refs == nil {
		g.refs = map[string]map[string][]string{}
	}
	if g.refs[from] == nil {
		g.refs[from] = map[string][]string{}
	}
	names := g.refs[from][to]
	if i, found := slices.BinarySearch(names, name); !found {
		g.refs[from][to] = slices.Insert(names, i, name)
	}
}

// targets lists, sorted, the files that from names something of.
func (g fileGraph) targets(from string) []string {
	var to []string
	for f := range g.refs[from] {
		to = append(to, f)
	}
	slices.Sort(to)
	return to
}

// sources lists, sorted, every file that names something in another file.
func (g fileGraph) sources() []string {
	var from []string
	for f := range g.refs {
		from = append(from, f)
	}
	slices.Sort(from)
	return from
}

// unrankedFiles lists the files of g that have no row in rows.
func unrankedFiles(g fileGraph, rows [][]string) []string {
	rank := layerRanks(rows)
	var problems []string
	for _, f := range g.files {
		if _, ok := rank[f]; !ok {
			problems = append(problems, f+" has no row in layers: say which layer it belongs to")
		}
	}
	return problems
}

// upwardReferences lists every reference in g from a file to one in a
// higher row of rows. A file without a row is unrankedFiles' to report.
func upwardReferences(g fileGraph, rows [][]string) []string {
	rank := layerRanks(rows)
	var problems []string
	for _, from := range g.sources() {
		for _, to := range g.targets(from) {
			rf, okf := rank[from]
			rt, okt := rank[to]
			if okf && okt && rt < rf {
				problems = append(problems, fmt.Sprintf("%s names %s from %s, a layer above it: "+
					"a file names only its own layer and those below; move what it names down, or the file up",
					from, strings.Join(g.refs[from][to], ", "), to))
			}
		}
	}
	return problems
}

func layerRanks(rows [][]string) map[string]int {
	rank := map[string]int{}
	for i, files := range rows {
		for _, f := range files {
			rank[f] = i
		}
	}
	return rank
}

// twoWayPairs lists, once per pair, every two files of g that each name
// something declared in the other.
func twoWayPairs(g fileGraph) []string {
	var problems []string
	for _, a := range g.sources() {
		for _, b := range g.targets(a) {
			if a < b && len(g.refs[b][a]) > 0 {
				problems = append(problems, fmt.Sprintf("%s names %s from %s and %s names %s from %s: "+
					"a two-way pair; one of them must move so that only one file names the other",
					a, strings.Join(g.refs[a][b], ", "), b, b, strings.Join(g.refs[b][a], ", "), a))
			}
		}
	}
	return problems
}

// maxCycles bounds how many rings fileCycles reports: past a few, the list
// says no more about what to move, and the search could grow large.
const maxCycles = 20

// fileCycles lists every simple ring of three or more files in g, each once,
// starting from its least file, with the names each file takes from the
// next. Rings of two are twoWayPairs' to report.
func fileCycles(g fileGraph) []string {
	var problems []string
	var path []string
	onPath := map[string]bool{}
	var walk func(start, at string) bool // false once maxCycles rings are found
	walk = func(start, at string) bool {
		path = append(path, at)
		onPath[at] = true
		defer func() {
			path = path[:len(path)-1]
			onPath[at] = false
		}()
		for _, next := range g.targets(at) {
			switch {
			case next == start && len(path) >= 3:
				if len(problems) == maxCycles {
					problems = append(problems, fmt.Sprintf("more than %d cycles: break the ones above first", maxCycles))
					return false
				}
				problems = append(problems, cycleMessage(g, path))
			case next > start && !onPath[next]:
				if !walk(start, next) {
					return false
				}
			}
		}
		return true
	}
	for _, start := range g.sources() {
		if !walk(start, start) {
			break
		}
	}
	return problems
}

func cycleMessage(g fileGraph, ring []string) string {
	var arrows, names []string
	for i, from := range ring {
		to := ring[(i+1)%len(ring)]
		arrows = append(arrows, from)
		names = append(names, fmt.Sprintf("%s names %s from %s", from, strings.Join(g.refs[from][to], ", "), to))
	}
	arrows = append(arrows, ring[0])
	return fmt.Sprintf("cycle %s (%s): files in a ring can be read and tested only all together; "+
		"move one of these names so that one arrow goes away",
		strings.Join(arrows, " → "), strings.Join(names, "; "))
}

// transportsReachingCore lists every reference in g from a file of
// transports to a file of core.
func transportsReachingCore(g fileGraph, transports, core []string) []string {
	var problems []string
	for _, from := range g.sources() {
		if !slices.Contains(transports, from) {
			continue
		}
		for _, to := range g.targets(from) {
			if slices.Contains(core, to) {
				problems = append(problems, fmt.Sprintf("%s names %s from %s, a file of the job core: "+
					"a transport hands requests to a session and writes what it answers; "+
					"reach the job through the session and tool layers instead",
					from, strings.Join(g.refs[from][to], ", "), to))
			}
		}
	}
	return problems
}

// missingFiles lists the files of list, called listName, that g lacks.
func missingFiles(g fileGraph, listName string, list []string) []string {
	var problems []string
	for _, f := range list {
		if !slices.Contains(g.files, f) {
			problems = append(problems, fmt.Sprintf("%s names %s, which the package lacks: "+
				"drop it from %s or add the file that took its place", listName, f, listName))
		}
	}
	return problems
}

var (
	graphMu     sync.Mutex
	graphCached *fileGraph
)

// graphPlatforms are the GOOS values the package is type-checked for: Linux
// first, and macOS, whose twins (sys_other.go, confine_other.go, …) no
// Linux build reads.
var graphPlatforms = []string{"linux", "darwin"}

// packageGraph returns the package's file graph, the union of its graphs on
// graphPlatforms, type-checked once per test binary. Each type-check runs
// in a re-executed test binary: it runs `go list`, whose exit status this
// process's reaper would otherwise collect first.
func packageGraph(t *testing.T) fileGraph {
	t.Helper()
	onLinux(t)
	graphMu.Lock()
	defer graphMu.Unlock()
	if graphCached != nil {
		return *graphCached
	}
	var g fileGraph
	for _, goos := range graphPlatforms {
		code, out := runChild(t, append(os.Environ(), childModeEnv+"=layers", "GOOS="+goos, "CGO_ENABLED=0"))
		if code != 0 {
			t.Fatalf("type-check for %s (exit %d): %s", goos, code, out)
		}
		if err := g.parse(out); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(g.files)
	g.files = slices.Compact(g.files)
	graphCached = &g
	return g
}

// The child's lines: "file\tNAME" for each file type-checked, and
// "ref\tFROM\tTO\tNAME" for each name FROM takes from TO.
func init() {
	childModes["layers"] = func() int {
		g, err := typeCheckGraph()
		if err != nil {
			fmt.Println(err)
			return 2
		}
		for _, f := range g.files {
			fmt.Printf("file\t%s\n", f)
		}
		for _, from := range g.sources() {
			for _, to := range g.targets(from) {
				for _, name := range g.refs[from][to] {
					fmt.Printf("ref\t%s\t%s\t%s\n", from, to, name)
				}
			}
		}
		return 0
	}
}

// parse adds a type-check child's lines to g (its files unsorted, with
// repeats, until the caller sorts them).
func (g *fileGraph) parse(out string) error {
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Split(line, "\t")
		switch {
		case len(fields) == 2 && fields[0] == "file":
			g.files = append(g.files, fields[1])
		case len(fields) == 4 && fields[0] == "ref":
			g.addRef(fields[1], fields[2], fields[3])
		default:
			return fmt.Errorf("type-check child wrote %q, want a file or ref line", line)
		}
	}
	return nil
}

// typeCheckGraph type-checks the package's non-test files that build on
// the platform $GOOS names (build.Default reads it) and records each use of a package-level name (a method or
// field counts as declared where its declaration is) from a file other
// than the one declaring it.
func typeCheckGraph() (fileGraph, error) {
	paths, err := filepath.Glob("*.go")
	if err != nil {
		return fileGraph{}, err
	}
	var g fileGraph
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		// Another platform's twin (sys_other.go) would redeclare this one's names.
		if ok, err := build.Default.MatchFile(".", p); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return fileGraph{}, err
		}
		files = append(files, f)
		g.files = append(g.files, p)
	}
	slices.Sort(g.files)
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("main", fset, files, info)
	if err != nil {
		return fileGraph{}, err
	}
	owners := fieldOwners(pkg)
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() || isLocal(obj, pkg) {
			continue
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from != to {
			g.addRef(from, to, qualifiedName(obj, owners))
		}
	}
	return g, nil
}

// fieldOwners maps each field of the package's named struct types to its
// type's name.
func fieldOwners(pkg *types.Package) map[*types.Var]string {
	owners := map[*types.Var]string{}
	for _, name := range pkg.Scope().Names() {
		if tn, ok := pkg.Scope().Lookup(name).(*types.TypeName); ok {
			if st, ok := tn.Type().Underlying().(*types.Struct); ok {
				for f := range st.Fields() {
					owners[f] = name
				}
			}
		}
	}
	return owners
}

// qualifiedName names obj as a reader finds it: a method or field by its
// type and name (job.outcome), anything else by its name alone.
func qualifiedName(obj types.Object, owners map[*types.Var]string) string {
	if v, ok := obj.(*types.Var); ok && owners[v] != "" {
		return owners[v] + "." + v.Name()
	}
	if f, ok := obj.(*types.Func); ok {
		if recv := f.Type().(*types.Signature).Recv(); recv != nil {
			t := recv.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if n, ok := t.(*types.Named); ok {
				return n.Obj().Name() + "." + f.Name()
			}
		}
	}
	return obj.Name()
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

// graphOf builds a graph from edges written "FROM TO NAME"; its files are
// every file an edge mentions plus extra.
func graphOf(edges []string, extra ...string) fileGraph {
	var g fileGraph
	files := slices.Clone(extra)
	for _, e := range edges {
		f := strings.Fields(e)
		g.addRef(f[0], f[1], f[2])
		files = append(files, f[0], f[1])
	}
	slices.Sort(files)
	g.files = slices.Compact(files)
	return g
}

// TestLayersChecksOnSmallGraphs proves each rule on graphs made for it, so
// that the rules hold whatever state the package is in.
func TestLayersChecksOnSmallGraphs(t *testing.T) {
	rows := [][]string{{"top.go"}, {"mid.go", "side.go"}, {"low.go"}}
	cases := []struct {
		rule  string
		check func(fileGraph) []string
		edges []string
		extra []string
		want  []string // each problem, by a part of its text, in order
	}{
		{"point down", func(g fileGraph) []string { return upwardReferences(g, rows) },
			[]string{"top.go mid.go a", "mid.go side.go b", "side.go low.go c", "top.go low.go d"}, nil, nil},
		{"point down", func(g fileGraph) []string { return upwardReferences(g, rows) },
			[]string{"low.go mid.go x", "low.go mid.go y", "mid.go top.go z", "top.go mid.go a"}, nil,
			[]string{"low.go names x, y from mid.go, a layer above it", "mid.go names z from top.go, a layer above it"}},
		{"row for every file", func(g fileGraph) []string { return unrankedFiles(g, rows) },
			[]string{"top.go mid.go a"}, []string{"new.go"},
			[]string{"new.go has no row in layers"}},
		{"two-way pairs", twoWayPairs,
			[]string{"a.go b.go x", "b.go c.go y", "c.go a.go z"}, nil, nil},
		{"two-way pairs", twoWayPairs,
			[]string{"b.go a.go y", "a.go b.go x", "a.go b.go w", "b.go c.go v"}, nil,
			[]string{"a.go names w, x from b.go and b.go names y from a.go: a two-way pair"}},
		{"cycles", fileCycles,
			[]string{"a.go b.go x", "b.go a.go y", "b.go c.go z"}, nil, nil},
		{"cycles", fileCycles,
			[]string{"c.go a.go z", "b.go c.go y", "a.go b.go x", "a.go c.go w"}, nil,
			[]string{"cycle a.go → b.go → c.go → a.go (a.go names x from b.go; b.go names y from c.go; c.go names z from a.go)"}},
		{"cycles", fileCycles,
			[]string{"d.go a.go p", "a.go b.go q", "b.go c.go r", "c.go d.go s", "c.go a.go t", "e.go a.go u"}, nil,
			[]string{"cycle a.go → b.go → c.go → a.go", "cycle a.go → b.go → c.go → d.go → a.go"}},
		{"transports skip the core", func(g fileGraph) []string {
			return transportsReachingCore(g, []string{"wire.go"}, []string{"job.go", "proc.go"})
		},
			[]string{"wire.go session.go a", "session.go job.go b", "wire.go proc.go c", "wire.go proc.go d"}, nil,
			[]string{"wire.go names c, d from proc.go, a file of the job core"}},
		{"listed files exist", func(g fileGraph) []string { return missingFiles(g, "coreFiles", []string{"job.go", "gone.go"}) },
			[]string{"wire.go job.go a"}, nil,
			[]string{"coreFiles names gone.go, which the package lacks"}},
	}
	for _, c := range cases {
		got := c.check(graphOf(c.edges, c.extra...))
		if len(got) != len(c.want) {
			t.Errorf("%s on %q: got %d problems %q, want %d", c.rule, c.edges, len(got), got, len(c.want))
			continue
		}
		for i, part := range c.want {
			if !strings.Contains(got[i], part) {
				t.Errorf("%s on %q: problem %q does not say %q", c.rule, c.edges, got[i], part)
			}
		}
	}
}

// TestLayersCyclesAreBounded checks that a graph full of rings yields a
// bounded report that says there is more.
func TestLayersCyclesAreBounded(t *testing.T) {
	var edges []string
	for _, a := range "abcdefg" {
		for _, b := range "abcdefg" {
			if a != b {
				edges = append(edges, fmt.Sprintf("%c.go %c.go n", a, b))
			}
		}
	}
	got := fileCycles(graphOf(edges))
	if len(got) != maxCycles+1 || !strings.HasPrefix(got[maxCycles], "more than") {
		t.Errorf("got %d problems ending %q, want %d rings and a note there are more", len(got), got[len(got)-1], maxCycles)
	}
}

// variantNames are the names that carry a variant — the configured
// profile, the protocol era or revision, the task form, structured
// output — by their last part: a field, a constant or a type.
var variantNames = []string{"profile", "profileAgent", "profileCompat", "structured", "asTask", "toEnd", "era", "revision", "dialect"}

// coreTop is the highest row of the job core for the variant rule: its
// files and every file below them run a job the same way whatever the
// client speaks. coreEntry, the one way a call runs a job, takes plain
// options too, though it sits above with the tool layer it serves.
const (
	coreTop   = "kill.go"
	coreEntry = "lifecycle.go"
)

// settingsFile declares the settings, the profile among them: who reads
// the profile is what the variant rule checks, not that it declares it.
const settingsFile = "config.go"

// TestLayersCoreNamesNoVariant fails on every name of a variant used in
// lifecycle.go or a file of the job core. Variants are decided at the edge (the
// session and the tool sets) and reach the core as plain options.
func TestLayersCoreNamesNoVariant(t *testing.T) {
	g := packageGraph(t)
	core := variantFreeFiles(layers)
	problems := variantReferences(g, core, variantNames)
	reportProblems(t, append(problems, variantDeclarations(t, core, variantNames)...))
}

// variantDeclarations lists every field, parameter, constant, variable or
// type declared in a file of core whose name is in variants: a name used
// within its own file is no reference between files.
func variantDeclarations(t *testing.T, core []string, variants []string) []string {
	t.Helper()
	var problems []string
	fset := token.NewFileSet()
	for _, file := range core {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if os.IsNotExist(err) {
			continue // a row for a file of another platform's build, or none yet
		}
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Obj != nil && id.Obj.Decl != nil && id.Obj.Pos() == id.Pos() &&
				slices.Contains(variants, id.Name) {
				problems = append(problems, fmt.Sprintf("%s declares %s: the job core takes plain options, "+
					"not a variant; name what it does for the job", fset.Position(id.Pos()), id.Name))
			}
			return true
		})
	}
	slices.Sort(problems)
	return problems
}

// variantFreeFiles lists coreEntry and the files of coreTop's row and
// every row below it, sorted.
func variantFreeFiles(rows [][]string) []string {
	rank := layerRanks(rows)
	files := []string{coreEntry}
	for f, r := range rank {
		if r >= rank[coreTop] && f != settingsFile {
			files = append(files, f)
		}
	}
	slices.Sort(files)
	return files
}

// variantReferences lists every reference in g, from a file of core, to a
// name whose last part (after a dot) or type is in variants.
func variantReferences(g fileGraph, core []string, variants []string) []string {
	var problems []string
	for _, from := range g.sources() {
		if !slices.Contains(core, from) {
			continue
		}
		for _, to := range g.targets(from) {
			var named []string
			for _, name := range g.refs[from][to] {
				typ, last, found := strings.Cut(name, ".")
				if !found {
					last = typ
				}
				if slices.Contains(variants, last) || slices.Contains(variants, typ) {
					named = append(named, name)
				}
			}
			if len(named) > 0 {
				problems = append(problems, fmt.Sprintf("%s names %s from %s: the job core runs a job the same way "+
					"for every profile, era, task form and output shape; decide the variant at the edge and pass a plain option",
					from, strings.Join(named, ", "), to))
			}
		}
	}
	return problems
}

// TestEveryFunctionIsDocumented holds every function and method of the
// package, on every platform's files, to a doc comment: the contract is
// written where the code is, and a new file cannot quietly skip it.
func TestEveryFunctionIsDocumented(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Doc == nil {
				problems = append(problems, fmt.Sprintf("%s: %s has no doc comment: say what it does "+
					"and what its caller must know", fset.Position(fn.Pos()), fn.Name.Name))
			}
		}
	}
	reportProblems(t, problems)
}
