package main

import (
	"fmt"
	"strings"
	"sync"
	"time"
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

// toolNamesOf lists the names of tools in order.
func toolNamesOf(tools []toolSpec) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.name
	}
	return names
}

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

// jobsContract is what the jobs set asks of its jobs: numbered ids, and
// events as 1.0 tells them.
var jobsContract = &jobContract{events: jobEventParams}

// jobEventParams is the notifications/job params of a jobs-set job's start
// or end, or nil when none is sent: only with MCP_EXEC_JOB_EVENTS.
func jobEventParams(cfg *config, j *job, event string) map[string]any {
	if !cfg.jobEvents {
		return nil
	}
	params := map[string]any{"job_id": j.id, "event": event, "command": j.command,
		"runtime_ms": time.Since(j.started).Milliseconds()}
	o := j.outcome()
	params["state"] = o.state
	if event == "started" {
		params["state"] = stateRunning // it may have ended already: its end is told next
	}
	if event == "finished" {
		params["exit_code"] = o.exitCode
		if o.signal > 0 {
			params["signal"] = signalWords(o.signal)
		}
	}
	return params
}
