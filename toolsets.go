package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// A tool set is one system's tool contract over the same jobs: the seven
// job tools (jobs), the exec-mcp gateway's single exec tool (exec) and the
// Shell toolkit's six tools (shell). MCP_EXEC_TOOLS picks which a session
// offers; each is only a table of toolSpecs and their handlers, so every
// set gets the same reaper, kills, policy, sandbox and transports.

// toolSet is one row of toolSets.
type toolSet struct {
	tools        func(cfg *config) []toolSpec
	instructions func(cfg *config) string // advice to the model, with {placeholders}
}

// toolSets is every tool set, by its MCP_EXEC_TOOLS name.
var toolSets = map[string]toolSet{
	toolSetJobs:  {tools: func(*config) []toolSpec { return jobTools }, instructions: jobsInstructions},
	toolSetExec:  {tools: func(*config) []toolSpec { return execTools }, instructions: execInstructions},
	toolSetShell: {tools: shellTools, instructions: shellInstructions},
}

// toolTable is the tools one configuration offers.
type toolTable struct {
	list   []toolSpec // in tools/list order
	byName map[string]*toolSpec
}

// names lists the table's tool names in order.
func (t *toolTable) names() []string { return toolNamesOf(t.list) }

// toolTables caches the table of each configuration.
var toolTables sync.Map // *config → *toolTable

// toolsFor is the table of the tool sets cfg offers, in the order it names
// them. Two tools of one name are a programming error: it panics.
func toolsFor(cfg *config) *toolTable {
	if t, ok := toolTables.Load(cfg); ok {
		return t.(*toolTable)
	}
	table := &toolTable{byName: map[string]*toolSpec{}}
	for _, name := range cfg.offered() {
		table.list = append(table.list, toolSets[name].tools(cfg)...)
	}
	for i := range table.list {
		t := &table.list[i]
		if table.byName[t.name] != nil {
			panic(fmt.Sprintf("two tools named %s", t.name))
		}
		table.byName[t.name] = t
	}
	t, _ := toolTables.LoadOrStore(cfg, table)
	return t.(*toolTable)
}

// instructionsFor is the initialize result's advice to the model under cfg:
// each offered set's, then the policy in force.
func instructionsFor(cfg *config) string {
	sets := cfg.offered()
	parts := make([]string, len(sets))
	for i, name := range sets {
		parts[i] = toolSets[name].instructions(cfg)
	}
	return placeholders(cfg).Replace(strings.Join(parts, " ") + "{policy}")
}

// prepareTool readies tool name with raw arguments (a JSON object, or nil
// for none) and returns the run of its handler, whose answer c.reply makes
// the call's result. It runs as the call is read: arguments are bound and
// the jobs they name are held now (see holdJobs), the work happens when
// run is called. An unknown tool wraps errUnknownTool and a malformed
// arguments object errBadParams; a run returns the handler's answer or
// error (argument values, job state: a tool error once replied).
func prepareTool(c *toolCall, name string, args json.RawMessage) (run func() (answer, error), err error) {
	table := toolsFor(c.cfg)
	t, ok := table.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s (the tools are %s)", errUnknownTool, clipText(name), strings.Join(table.names(), ", "))
	}
	raw := map[string]json.RawMessage{}
	if args != nil && !isNull(args) {
		if raw, err = decodeObject(args); err != nil {
			return nil, fmt.Errorf("%w: arguments: %v", errBadParams, err)
		}
	}
	handle, failed := t.prepare(c, raw)
	if failed != nil {
		return func() (answer, error) { return toolFailure(failed), nil }, nil
	}
	return handle, nil
}

// taskForm is which revision's tasks a request may use.
type taskForm int

const (
	tasksOff    taskForm = iota // the client declared no tasks: today's behaviour, byte for byte
	tasksLegacy                 // 2025-11-25, declared at initialize
	tasksModern                 // 2026-07-28, the extension declared in the request's _meta
)

// taskDescription is what a tool's description adds where tasks apply.
func taskDescription(t *toolSpec, form taskForm) string {
	switch {
	case form == tasksLegacy && t.taskSupport:
		return " Run as an MCP task (params.task), it answers at once and runs to the end; tasks/result returns this result."
	case form == tasksModern && t.yieldsTask:
		return " With the MCP tasks extension a call that would yield answers as a task; tasks/get polls it and carries this result."
	}
	return ""
}

// toolLists caches the tools/list result of each configuration and shape.
var toolLists sync.Map // toolListKey → map[string]any

// toolListKey names one cached tools/list result.
type toolListKey struct {
	cfg                *config
	structured, modern bool
	tasks              taskForm
}

// toolListTTLMs is how long a modern client may cache tools/list: the list
// changes only when the server restarts with other settings.
const toolListTTLMs = 3600000

// toolListWith is the tools/list result under cfg for a client of the
// tasks form given: the table, with the values in force written into the
// descriptions; structured (2025-06-18 on) with titles and output
// schemas, modern (2026-07-28) with caching advice; the tools that run as
// tasks say so (in 2025-11-25 also with execution.taskSupport).
func toolListWith(cfg *config, structured, modern bool, tasks taskForm) map[string]any {
	key := toolListKey{cfg, structured, modern, tasks}
	if l, ok := toolLists.Load(key); ok {
		return l.(map[string]any)
	}
	fill := placeholders(cfg)
	tools := toolsFor(cfg).list
	list := make([]map[string]any, 0, len(tools))
	agent := cfg.profile == profileAgent
	for i := range tools {
		t := &tools[i]
		text := textOf(t, cfg)
		docs := make(map[string]string, len(text.docs))
		for k, v := range text.docs {
			docs[k] = fill.Replace(v)
		}
		tool := map[string]any{"name": t.name, "description": fill.Replace(text.description) + taskDescription(t, tasks)}
		if tasks == tasksLegacy && t.taskSupport {
			tool["execution"] = map[string]any{"taskSupport": "optional"}
		}
		if agent {
			tool["inputSchema"] = plainSchemaOf(t.params, docs)
		} else {
			tool["inputSchema"] = schemaOf(t.params, docs)
		}
		if hints := annotationsFor(*t, cfg); len(hints) > 0 {
			tool["annotations"] = hints
		}
		if structured {
			tool["title"] = t.title
			switch {
			case t.output == nil:
			case agent:
				tool["outputSchema"] = openObjectSchema()
			default:
				tool["outputSchema"] = t.output()
			}
		}
		list = append(list, tool)
	}
	result := map[string]any{"tools": list}
	if modern {
		result["ttlMs"] = toolListTTLMs
		result["cacheScope"] = "public"
	}
	l, _ := toolLists.LoadOrStore(key, result)
	return l.(map[string]any)
}

// annotationsFor is a tool's annotations under cfg. A tool that runs jobs
// reaches the network unless it is off, and changes nothing under the
// read-only sandbox.
func annotationsFor(t toolSpec, cfg *config) map[string]any {
	if t.hints != nil {
		return t.hints
	}
	readOnly := t.readOnly || t.runsJobs && cfg.sandbox == sandboxReadOnly
	return map[string]any{
		"readOnlyHint":    readOnly,
		"destructiveHint": t.destructive && !readOnly,
		"idempotentHint":  t.idempotent,
		"openWorldHint":   t.runsJobs && !cfg.networkOff,
	}
}
