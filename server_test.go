package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
)

// collectingSink is a replySink that keeps every message.
type collectingSink struct {
	mu   sync.Mutex // guards msgs
	msgs [][]byte
}

func (c *collectingSink) send(msg []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, msg)
}

// TestEndingOneSessionLeavesTheOther: two sessions of one server each run a
// job; ending the first tears its job's tree down and leaves the second's
// job running and reachable. Shutdown then ends the second, and no session
// opens after it.
func TestEndingOneSessionLeavesTheOther(t *testing.T) {
	onLinux(t)
	t.Parallel()
	srv := newServer(testConfig())
	first, second := twoSessions(t, srv)
	doomed := startJob(t, first.reg, "sleep 60 & exec sleep 60")
	kept := startJob(t, second.reg, "sleep 60 & exec sleep 60")
	waitForSleeps(t, doomed.pid, 2)
	waitForSleeps(t, kept.pid, 2)

	srv.end(first)
	if groupAlive(doomed.pid) {
		t.Errorf("the ended session's job %d: its group is alive; want its tree gone", doomed.pid)
	}
	awaitDone(t, doomed)
	if len(inGroup(kept.pid)) != 2 || kept.terminal() {
		t.Errorf("the other session's job lost processes: %v, finished %v", inGroup(kept.pid), kept.terminal())
	}
	if _, err := second.reg.lookup(kept.id); err != nil {
		t.Errorf("the other session no longer finds its job: %v", err)
	}

	srv.shutdown()
	if groupAlive(kept.pid) {
		t.Errorf("shutdown left job %d's group alive", kept.pid)
	}
	if _, err := srv.open(srv.cfg, "test", &collectingSink{}); !errors.Is(err, errServerClosing) {
		t.Errorf("open after shutdown: %v, want errServerClosing", err)
	}
}

// TestServerNamesSessionsInTheJobLog: each session the server opens is
// named in the job log by its kind and a number of its own, never by an id
// a client holds.
func TestServerNamesSessionsInTheJobLog(t *testing.T) {
	srv := newServer(testConfig())
	srv.jobLog = newJobLog(io.Discard)
	for i, kind := range []string{"stdio", "http", "http-exec"} {
		ss, err := srv.open(srv.cfg, kind, &collectingSink{})
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%s-%d", kind, i+1); ss.reg.session != want || ss.reg.log != srv.jobLog {
			t.Errorf("session %q (log %v), want %q with the server's log", ss.reg.session, ss.reg.log, want)
		}
	}
	srv.shutdown()
}

// TestSessionsShareTheServersToolBook: the tool table and lists are
// computed once, when the server is made, and every session of its
// settings uses that one book; a session with settings of its own gets
// its own.
func TestSessionsShareTheServersToolBook(t *testing.T) {
	srv := newServer(testConfig())
	first, second := twoSessions(t, srv)
	if first.tools != srv.tools || second.tools != srv.tools {
		t.Errorf("sessions' books %p and %p, the server's %p", first.tools, second.tools, srv.tools)
	}
	other, err := srv.open(configOf(t, "MCP_EXEC_TOOLS=exec"), "test", &collectingSink{})
	if err != nil {
		t.Fatal(err)
	}
	if other.tools == srv.tools || !slices.Equal(other.tools.table.names(), []string{"exec"}) {
		t.Errorf("a session of other settings got %v", other.tools.table.names())
	}
	for _, s := range []*session{first, second, other} {
		srv.end(s)
	}
}

// twoSessions opens two sessions of srv's own settings.
func twoSessions(t *testing.T, srv *server) (first, second *session) {
	t.Helper()
	var err error
	if first, err = srv.open(srv.cfg, "test", &collectingSink{}); err != nil {
		t.Fatal(err)
	}
	if second, err = srv.open(srv.cfg, "test", &collectingSink{}); err != nil {
		t.Fatal(err)
	}
	return first, second
}
