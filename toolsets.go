package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// A tool set is one system's tool contract over the same jobs: the seven
// job tools (jobs), the exec-mcp gateway's single exec tool (exec) and the
// Shell toolkit's six tools (shell). MCP_EXEC_TOOLS picks which a session
// offers; each is only a table of toolSpecs and their handlers, so every
// set gets the same reaper, kills, policy, sandbox and transports.

// toolSet is one row of toolSets.
type toolSet struct {
	tools func(cfg *config) []toolSpec
	// instructions is the set's advice to the model, with {placeholders},
	// in the words of d (the agent profile's, or the usual).
	instructions func(cfg *config, d dialect) string
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

// toolsFor builds the table of the tool sets cfg offers, in the order it
// names them. Two tools of one name are a programming error: it panics.
func toolsFor(cfg *config) *toolTable {
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
	return table
}

// toolBook is what one configuration offers, computed once when the
// server is made and never changed after: its table of tools and the
// tools/list result of every dialect a client can speak. Sessions share
// it without a lock.
type toolBook struct {
	cfg   *config
	table *toolTable
	lists map[dialect]map[string]any // tools/list results, by the dialect they are for
}

// newToolBook computes cfg's book.
func newToolBook(cfg *config) *toolBook {
	b := &toolBook{cfg: cfg, table: toolsFor(cfg), lists: map[dialect]map[string]any{}}
	legacy, structured, modern := replyShape{}, replyShape{structured: true}, replyShape{modern: true, structured: true}
	// The dialects a request can have: structured from 2025-06-18 on and
	// always in the modern era; each era its own tasks.
	for _, d := range []dialect{
		b.dialectOf(legacy, tasksOff),
		b.dialectOf(structured, tasksOff),
		b.dialectOf(structured, tasksLegacy),
		b.dialectOf(modern, tasksOff),
		b.dialectOf(modern, tasksModern),
	} {
		b.lists[d] = b.listFor(d)
	}
	return b
}

// dialectOf is the dialect of a request dressed as shape whose client may
// use tasks of form, under the book's configuration.
func (b *toolBook) dialectOf(shape replyShape, tasks taskForm) dialect {
	return dialect{replyShape: shape, tasks: tasks, agent: b.cfg.profile == profileAgent}
}

// instructions is the advice to the model a client speaking d is given:
// each offered set's, then the policy in force, then what tasks add.
func (b *toolBook) instructions(d dialect) string {
	sets := b.cfg.offered()
	parts := make([]string, len(sets))
	for i, name := range sets {
		parts[i] = toolSets[name].instructions(b.cfg, d)
	}
	text := placeholders(b.cfg).Replace(strings.Join(parts, " ")+"{policy}") + b.taskInstructions(d.tasks)
	if d.agent { // 1.3: which tree kill reaches; a 1.0 client's text stays 1.0's
		text += " " + treeWords(treeInForce())
	}
	return text
}

// taskInstructions is what the instructions add where tasks of form apply.
func (b *toolBook) taskInstructions(form taskForm) string {
	switch form {
	case tasksLegacy:
		return " A host may run " + b.taskTools() + " as MCP tasks: the call answers at once and the host polls for its result."
	case tasksModern:
		if _, ok := b.table.byName["execute"]; ok {
			return " With the MCP tasks extension, an execute that would yield answers as a task instead, which the host polls."
		}
	}
	return ""
}

// taskTools names the tools that may run as tasks.
func (b *toolBook) taskTools() string {
	var names []string
	for _, t := range b.table.list {
		if t.taskSupport {
			names = append(names, t.name)
		}
	}
	return strings.Join(names, ", ")
}

// prepareTool readies tool name with raw arguments (a JSON object, or nil
// for none) and returns the run of its handler, whose answer c.reply makes
// the call's result. It runs as the call is read: arguments are bound and
// the jobs they name are held now (see holdJobs), the work happens when
// run is called. An unknown tool wraps errUnknownTool and a malformed
// arguments object errBadParams; a run returns the handler's answer or
// error (argument values, job state: a tool error once replied).
func (b *toolBook) prepareTool(c *toolCall, name string, args json.RawMessage) (run func() (answer, error), err error) {
	table := b.table
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

// toolListTTLMs is how long a modern client may cache tools/list: the list
// changes only when the server restarts with other settings.
const toolListTTLMs = 3600000

// toolList is the tools/list result for a client speaking d, as the book
// computed it.
func (b *toolBook) toolList(d dialect) map[string]any {
	if l, ok := b.lists[d]; ok {
		return l
	}
	return b.listFor(d) // no request has such a dialect: computed, not kept
}

// listFor is the tools/list result for a client speaking d: the table,
// with the values in force written into the descriptions; structured
// (2025-06-18 on) with titles and output schemas, modern (2026-07-28) with
// caching advice; the tools that run as tasks say so (in 2025-11-25 also
// with execution.taskSupport).
func (b *toolBook) listFor(d dialect) map[string]any {
	cfg, tasks := b.cfg, d.tasks
	fill := placeholders(cfg)
	tools := b.table.list
	list := make([]map[string]any, 0, len(tools))
	for i := range tools {
		t := &tools[i]
		text := textOf(t, d)
		docs := make(map[string]string, len(text.docs))
		for k, v := range text.docs {
			docs[k] = fill.Replace(v)
		}
		tool := map[string]any{"name": t.name, "description": fill.Replace(text.description) + taskDescription(t, tasks)}
		if tasks == tasksLegacy && t.taskSupport {
			tool["execution"] = map[string]any{"taskSupport": "optional"}
		}
		if d.agent {
			tool["inputSchema"] = plainSchemaOf(t.params, docs)
		} else {
			tool["inputSchema"] = schemaOf(t.params, docs)
		}
		if hints := annotationsFor(*t, cfg); len(hints) > 0 {
			tool["annotations"] = hints
		}
		if d.structured {
			tool["title"] = t.title
			switch {
			case t.output == nil:
			case d.agent:
				tool["outputSchema"] = openObjectSchema()
			default:
				tool["outputSchema"] = t.output()
			}
		}
		list = append(list, tool)
	}
	result := map[string]any{"tools": list}
	if d.modern {
		result["ttlMs"] = toolListTTLMs
		result["cacheScope"] = "public"
	}
	return result
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
