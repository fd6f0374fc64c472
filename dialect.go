package main

// dialect is how one request is answered, decided once where the session
// reads the request (its era and negotiated revision, the tasks its client
// declared, the configuration's profile) and passed down unchanged: it
// dresses replies, picks the tools/list a client sees, sizes results and
// chooses the words of descriptions and instructions. Nothing below the
// session asks the revision or the profile again.
type dialect struct {
	replyShape          // the era, and whether results go out structured too
	tasks      taskForm // which revision's tasks the request may use
	agent      bool     // MCP_EXEC_PROFILE=agent: texts, schemas and results for a model
}

// replyShape is how a request's result is dressed for its revision.
type replyShape struct {
	modern     bool // resultType and serverInfo on every result; no reply once cancelled
	structured bool // tools carry title and outputSchema, tool results structuredContent
}

// taskForm is which revision's tasks a request may use.
type taskForm int

const (
	tasksOff    taskForm = iota // no tasks (an older revision, or a modern client without the extension)
	tasksLegacy                 // 2025-11-25, negotiated at initialize: the server offers them to every client
	tasksModern                 // 2026-07-28, the extension declared in the request's _meta
)

// cost measures what a tool result costs in a reply line of d. Under the
// agent profile a result is sized as if the reply also carried it as
// structuredContent, so a model reads as much, about half the budget, in
// every protocol era.
func (d dialect) cost() lineCost {
	return lineCost{structured: d.structured || d.agent}
}

// view is how a result's slices show in a reply of d. Under the agent
// profile a cut ends at line boundaries and the text is plain (terminal
// escapes stripped, for pipe jobs too): a model reads lines, not drawing
// commands. Elsewhere slices are the raw bytes and cuts fall where the
// budget puts them, as in 1.1.
func (d dialect) view() sliceView {
	return sliceView{lineCuts: d.agent, plain: d.agent}
}
