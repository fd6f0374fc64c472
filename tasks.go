package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"syscall"
	"time"
)

// MCP tasks: a long call the client polls instead of holding it open, in
// the two forms the revisions define. In 2025-11-25 (an experimental core
// utility) any client of a session that negotiated that revision may send
// a tools/call with params.task: the call runs on in the background and is
// answered at once with the task; tasks/get polls it, tasks/result blocks
// for the call's own result, tasks/list lists and tasks/cancel kills. In
// 2026-07-28 (the io.modelcontextprotocol/tasks extension) the server
// decides: an execute that would yield, from a client that declared the
// extension, answers with resultType "task" instead; tasks/get carries the
// result and tasks/cancel acknowledges. Older revisions never see a task.
//
// A task is an edge over one call and its job, not a second lifecycle: the
// call runs its job as every call does (runJob) and the task keeps what it
// answers. The task collects its job when the job ends, like a wait
// blocked on it; so the job's result goes once, to the task and to any
// wait already blocked on the job then, and a later wait finds the job
// delivered.

// Task constants of both revisions.
const (
	extTasks        = "io.modelcontextprotocol/tasks"        // the 2026-07-28 extension's name
	metaRelatedTask = "io.modelcontextprotocol/related-task" // tasks/result's _meta naming its task (2025-11-25)
	tasksVersion    = "2025-11-25"                           // the legacy revision with tasks

	taskTTLDefault       = 10 * time.Minute // how long a finished task is kept when the client asks nothing
	taskTTLMost          = time.Hour        // the longest kept, whatever the client asks
	taskTTLLeast         = time.Second      // the shortest kept
	taskPollIntervalMs   = 1000             // the polling interval suggested to clients
	taskCancelWaitPerSig = 5 * time.Second  // tasks/cancel: TERM, then KILL after this, as kill's ASSURED

	// maxKeptTasks bounds a session's tasks: past it, opening one forgets
	// the oldest finished task before its ttl. Running tasks are bounded by
	// the job limit; finished ones (a call that failed at once takes no
	// job) would otherwise grow with the client's rate for up to an hour.
	maxKeptTasks = 1024
)

// declaresTaskExtension reports whether a modern request's client
// capabilities (message.clientCaps) declare the tasks extension.
func declaresTaskExtension(clientCaps json.RawMessage) bool {
	caps, _ := decodeObject(clientCaps)
	exts, _ := decodeObject(caps["extensions"])
	ext, ok := exts[extTasks]
	return ok && len(ext) > 0 && ext[0] == '{'
}

// legacyTaskCapability is capabilities.tasks in initialize's answer:
// tasks/list only where nobody else can reach the session's tasks (local
// stdio) or the transport knows its client (a token).
func legacyTaskCapability(listable bool) map[string]any {
	c := map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
	if listable {
		c["list"] = map[string]any{}
	}
	return c
}

// task is one call the client polls.
type task struct {
	id      string
	created time.Time
	ttl     time.Duration
	ctx     context.Context // the call's: ended by tasks/cancel or the session's end
	stop    context.CancelFunc
	done    chan struct{} // closed once res and err hold the call's answer

	mu        sync.Mutex // guards the fields below
	job       *job       // nil until the call's job started
	updated   time.Time
	cancelled bool
	settled   bool
	res       answer // the call's result: toolText or toolResult
	err       error  // or the error the call failed with
}

// taskBoard holds one session's tasks.
type taskBoard struct {
	reg     *registry
	running *sync.WaitGroup // the session's requests: a task's call is one of them
	ctx     context.Context // ended with the session
	end     context.CancelFunc

	mu    sync.Mutex // guards tasks
	tasks map[string]*task
}

// newTaskBoard returns an empty board for the session of reg, whose calls
// running wait for.
func newTaskBoard(reg *registry, running *sync.WaitGroup) *taskBoard {
	ctx, end := context.WithCancel(context.Background())
	return &taskBoard{reg: reg, running: running, ctx: ctx, end: end, tasks: map[string]*task{}}
}

// open makes a task under a fresh unguessable id, found from now on.
func (b *taskBoard) open(ttl time.Duration) *task {
	ctx, stop := context.WithCancel(b.ctx)
	now := time.Now()
	t := &task{id: randomID(), created: now, updated: now, ttl: ttl, ctx: ctx, stop: stop, done: make(chan struct{})}
	b.mu.Lock()
	if len(b.tasks) >= maxKeptTasks {
		b.forgetOldestFinishedLocked()
	}
	b.tasks[t.id] = t
	b.mu.Unlock()
	return t
}

// forgetOldestFinishedLocked forgets the finished task created first, if
// any task has finished. b.mu must be held; it takes each task's own lock
// briefly (the order is always board, then task).
func (b *taskBoard) forgetOldestFinishedLocked() {
	var oldest *task
	for _, t := range b.tasks {
		t.mu.Lock()
		settled := t.settled
		t.mu.Unlock()
		if settled && (oldest == nil || t.created.Before(oldest.created)) {
			oldest = t
		}
	}
	if oldest != nil {
		delete(b.tasks, oldest.id)
	}
}

// drop forgets t and ends its call if it still runs.
func (b *taskBoard) drop(t *task) {
	b.mu.Lock()
	if b.tasks[t.id] == t {
		delete(b.tasks, t.id)
	}
	b.mu.Unlock()
	t.stop()
}

// settle keeps the call's answer for t's ttl.
func (b *taskBoard) settle(t *task, res answer, err error) {
	t.mu.Lock()
	t.res, t.err, t.settled = res, err, true
	if !t.cancelled {
		t.updated = time.Now()
	}
	t.mu.Unlock()
	close(t.done)
	time.AfterFunc(t.ttl, func() { b.drop(t) })
}

// runLegacy is the run of a task-augmented call (2025-11-25): run goes on
// in the background under t, blocking until its job ends, and the call is
// answered with the task (CreateTaskResult) once the job has started or
// the call has answered. c is the call run works with, its waiter on t's
// context.
func (b *taskBoard) runLegacy(t *task, c *toolCall, run func() (answer, error)) func() (answer, error) {
	started := make(chan struct{})
	c.waitToEnd = true
	c.onStart = &taskStart{t: t, started: started}
	return func() (answer, error) {
		b.running.Add(1) // counted from here on: this request is one already
		go func() {
			defer b.running.Done()
			res, err := run()
			b.settle(t, res, err)
		}()
		select {
		case <-started:
		case <-t.done:
		}
		return wireValue(map[string]any{"task": t.view(false)}), nil
	}
}

// taskStart records a legacy task's job as it starts and says so on
// started.
type taskStart struct {
	t       *task
	started chan struct{} // closed once the job has started
	once    sync.Once     // closes started once
}

// jobStarted records j as the task's job.
func (s *taskStart) jobStarted(j *job) {
	s.t.mu.Lock()
	s.t.job = j
	s.t.mu.Unlock()
	s.once.Do(func() { close(s.started) })
}

// answerModern is the run of call c from a client with the extension
// (2026-07-28), run being its handler: a call whose job would yield
// becomes a task (adopt) and is answered with resultType "task", any other
// as always.
func (b *taskBoard) answerModern(c *toolCall, run func() (answer, error)) func() (answer, error) {
	return func() (answer, error) {
		res, err := run()
		// The one kind the tasks layer looks for: the rest go to reply.
		if y, ok := res.(yieldedAnswer); ok && err == nil {
			return typedResult{resultType: "task", body: b.adopt(c, y.job, y.later).view(true)}, nil
		}
		return c.reply(res, err)
	}
}

// adopt makes j, the running job of c's call that would yield, a task
// (2026-07-28), found before the call answers. A background wait collects
// the job when it ends and keeps render's result, as the call's reply
// makes it, for the task.
func (b *taskBoard) adopt(c *toolCall, j *job, render func() (answer, error)) *task {
	t := b.open(taskTTLDefault)
	t.mu.Lock()
	t.job = j
	t.mu.Unlock()
	b.running.Add(1) // counted from here on: the call adopting it is one already
	go func() {
		defer b.running.Done()
		_, _, err := c.reg.await(&waiter{ctx: t.ctx}, []*job{j}, awaitOptions{})
		var res answer
		if err == nil {
			res, err = c.reply(render())
		}
		b.settle(t, res, err)
	}()
	return t
}

// find is the task params.taskId names; -32602 for none.
func (b *taskBoard) find(params json.RawMessage) (*task, *rpcError) {
	p, _ := decodeObject(params)
	var id string
	if json.Unmarshal(p["taskId"], &id) != nil || id == "" {
		return nil, newError(codeInvalidParams, "invalid params: taskId must be the id string of a task")
	}
	b.mu.Lock()
	t := b.tasks[id]
	b.mu.Unlock()
	if t == nil {
		return nil, newError(codeInvalidParams, "invalid params: unknown task %q (a finished task is kept for its ttl, then forgotten)", clipText(id))
	}
	return t, nil
}

// taskState is a task as read at one moment.
type taskState struct {
	status, message string
	res             answer
	err             error
}

// state reads t: its status as the revision maps it (2025-11-25: an
// isError result is failed; 2026-07-28: completed, failed being for
// errors) and what to tell of it.
func (t *task) state(modern bool) taskState {
	t.mu.Lock()
	j, cancelled, settled, res, err := t.job, t.cancelled, t.settled, t.res, t.err
	t.mu.Unlock()
	var s taskState
	switch {
	case cancelled:
		s.status, s.message = "cancelled", "cancelled: its processes were killed"
	case !settled && j == nil:
		s.status, s.message = "working", "starting"
	case !settled && j.waitingForInput():
		s.status, s.message = "working", fmt.Sprintf("job %s waits for input on stdin (input writes to it)", j.id)
	case !settled:
		s.status, s.message = "working", fmt.Sprintf("job %s is running", j.id)
	case err != nil:
		s.status, s.message, s.err = "failed", err.Error(), err
	default:
		s.status, s.res = "completed", res
		if failure := res.toolError(); failure != "" {
			s.message = clipText(failure)
			if !modern {
				s.status = "failed"
			}
		} else if j != nil {
			s.message = fmt.Sprintf("job %s ended: %s", j.id, j.outcome().state)
		}
	}
	return s
}

// view is t's Task object as the revision shapes it, and its state.
func (t *task) view(modern bool) map[string]any {
	v, _ := t.viewState(modern)
	return v
}

// viewState is view and the state it shows.
func (t *task) viewState(modern bool) (map[string]any, taskState) {
	s := t.state(modern)
	t.mu.Lock()
	updated := t.updated
	t.mu.Unlock()
	v := map[string]any{"taskId": t.id, "status": s.status,
		"createdAt": t.created.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": updated.UTC().Format(time.RFC3339Nano)}
	if s.message != "" {
		v["statusMessage"] = s.message
	}
	ttl := t.ttl.Milliseconds()
	if modern {
		v["ttlMs"], v["pollIntervalMs"] = ttl, taskPollIntervalMs
	} else {
		v["ttl"], v["pollInterval"] = ttl, taskPollIntervalMs
	}
	return v, s
}

// taskTTLOf is the ttl a task-augmented call's params.task asks for, within
// what the server keeps: absent or null keeps the default.
func taskTTLOf(raw json.RawMessage) (time.Duration, *rpcError) {
	p, err := decodeObject(raw)
	if err != nil {
		return 0, newError(codeInvalidParams, "invalid params: params.task must be an object such as {\"ttl\": 60000}")
	}
	asked, ok := p["ttl"]
	if !ok || isNull(asked) {
		return taskTTLDefault, nil
	}
	var ms float64
	if json.Unmarshal(asked, &ms) != nil || math.IsNaN(ms) || ms < 0 {
		return 0, newError(codeInvalidParams, "invalid params: params.task.ttl must be milliseconds, 0 or more, or null")
	}
	return min(max(time.Duration(ms)*time.Millisecond, taskTTLLeast), taskTTLMost), nil
}

// get answers tasks/get: the flat Task; in 2026-07-28 with the call's
// result once completed, or its error once failed.
func (b *taskBoard) get(params json.RawMessage, modern bool) (answer, error) {
	t, rerr := b.find(params)
	if rerr != nil {
		return nil, rerr
	}
	v, s := t.viewState(modern)
	if modern {
		switch s.status {
		case "completed":
			v["result"] = s.res.callResult(true)
		case "failed":
			v["error"] = rpcErrorOf(s.err)
		}
	}
	return wireValue(v), nil
}

// result answers tasks/result (2025-11-25): it blocks until the call has
// answered and returns exactly that, with the related-task _meta.
func (b *taskBoard) result(ctx context.Context, params json.RawMessage, structured bool) (answer, error) {
	t, rerr := b.find(params)
	if rerr != nil {
		return nil, rerr
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return nil, errCancelled
	}
	t.mu.Lock()
	res, err := t.res, t.err
	t.mu.Unlock()
	if err != nil {
		return nil, rpcErrorOf(err)
	}
	obj := res.callResult(structured)
	obj.Meta = map[string]any{metaRelatedTask: map[string]any{"taskId": t.id}}
	return wireValue(obj), nil
}

// cancel answers tasks/cancel: the task is cancelled, then its job's whole
// tree killed as kill's ASSURED does (TERM, KILL if it outlives the wait)
// and its death awaited; a call with no job yet, or a tree that survived,
// is ended as a cancelled call is. 2025-11-25 answers the Task (an ended
// task is -32602); 2026-07-28 acknowledges, cancelling being cooperative.
func (b *taskBoard) cancel(ctx context.Context, params json.RawMessage, modern bool) (answer, error) {
	t, rerr := b.find(params)
	if rerr != nil {
		return nil, rerr
	}
	t.mu.Lock()
	ended, j := t.settled || t.cancelled, t.job
	if !ended {
		t.cancelled, t.updated = true, time.Now()
	}
	t.mu.Unlock()
	switch {
	case ended && modern:
		return wireValue(struct{}{}), nil
	case ended:
		return nil, newError(codeInvalidParams, "invalid params: task %s has already ended (%s); there is nothing to cancel", t.id, t.state(false).status)
	}
	killed := false
	if j != nil {
		plan := killPlan{signals: []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}, wait: taskCancelWaitPerSig}
		out, err := b.reg.kill(&waiter{ctx: ctx}, j, plan)
		if err != nil {
			return nil, err
		}
		killed = out.terminated
	}
	if !killed {
		t.stop() // its call ends as a cancelled one does: the job is torn down
	}
	if modern {
		return wireValue(struct{}{}), nil
	}
	return wireValue(t.view(false)), nil
}

// list answers tasks/list (2025-11-25): every task, oldest first, in one
// page.
func (b *taskBoard) list(params json.RawMessage) (answer, error) {
	p, _ := decodeObject(params)
	if c, ok := p["cursor"]; ok && !isNull(c) {
		return nil, newError(codeInvalidParams, "invalid params: tasks/list answers in one page and issued no cursor")
	}
	b.mu.Lock()
	tasks := make([]*task, 0, len(b.tasks))
	for _, t := range b.tasks {
		tasks = append(tasks, t)
	}
	b.mu.Unlock()
	slices.SortFunc(tasks, func(a, b *task) int { return a.created.Compare(b.created) })
	views := make([]map[string]any, len(tasks))
	for i, t := range tasks {
		views[i] = t.view(false)
	}
	return wireValue(map[string]any{"tasks": views}), nil
}

// update answers tasks/update (2026-07-28). No task of this server asks
// for input (a job that reads stdin gets it from the input tool), so any
// update is refused.
func (b *taskBoard) update(params json.RawMessage) (answer, error) {
	t, rerr := b.find(params)
	if rerr != nil {
		return nil, rerr
	}
	return nil, newError(codeInvalidParams, "invalid params: task %s asks for no input; a job reading stdin gets it from the input tool (%s)", t.id, t.state(true).message)
}
