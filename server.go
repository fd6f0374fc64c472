package main

import (
	"errors"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// shutdownKillDuration bounds the wait for processes after KILL, and for
// requests to answer, when sessions end.
const shutdownKillDuration = time.Second

// errServerClosing refuses a session opened after shutdown began.
var errServerClosing = errors.New("the server is shutting down")

// server owns what the whole process shares: the reaper, the signals that
// stop it, memory trimming, and the sessions (one per client) it hosts;
// ending one tears down its jobs only, shutdown every session's and more.
type server struct {
	cfg      *config
	tools    *toolBook        // what cfg offers, computed once for every session
	stop     <-chan os.Signal // carries the signal that ends the process
	activity *activityClock   // stamped when a request finishes in some session

	ownsProcess bool         // started by startServer: shutdown also ends every other descendant
	shared      jobSlots     // the running jobs of every shared session (openShared), against MCP_EXEC_MAX_JOBS
	jobLog      *jobLog      // MCP_EXEC_JOB_LOG; nil: off
	opened      atomic.Int64 // sessions opened so far: numbers each in the job log

	mu       sync.Mutex            // guards sessions and closing; taken alone: nothing is locked or ended under it
	sessions map[*session]struct{} // the open sessions
	closing  bool                  // shutdown began: no new sessions
}

// startServer readies the process to own children and starts the
// process-wide work; every session's jobs go to jobLog (nil: none). Call it
// once, before any session.
func startServer(cfg *config, jobLog *jobLog) *server {
	s := newServer(cfg)
	s.stop, s.ownsProcess, s.jobLog = watchSignals(), true, jobLog
	theProcess.windows.setBound(func() int64 {
		bound := cfg.memoryBound()
		limitRuntimeMemory(bound, os.Getenv("GOMEMLIMIT") != "")
		return bound
	})
	startSpill(cfg)
	prepareProcess(serverUndumpable(cfg))
	go trimWhenIdle(s.activity)
	return s
}

// newServer returns a server with no sessions and no process-wide work
// started; startServer is the one for a real process.
func newServer(cfg *config) *server {
	return &server{cfg: cfg, tools: newToolBook(cfg), activity: newActivityClock(), sessions: map[*session]struct{}{}}
}

// isClosing reports whether shutdown has begun.
func (s *server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// openShared opens a session, with settings cfg, for a transport whose
// clients could try each other's job ids: its ids are unguessable, and
// MCP_EXEC_MAX_JOBS counts every shared session's running jobs together.
func (s *server) openShared(cfg *config, kind string, out replySink) (*session, error) {
	ss, err := s.open(cfg, kind, out)
	if err == nil {
		ss.reg.randomIDs, ss.reg.everywhere = true, &s.shared
	}
	return ss, err
}

// open starts a session with the settings cfg that writes to out. After
// shutdown began it fails with errServerClosing. kind says what opened it
// (stdio, http, ...): the job log names the session by it and a number,
// never by anything a client could use to reach it (a token or an
// Mcp-Session-Id).
func (s *server) open(cfg *config, kind string, out replySink) (*session, error) {
	tools := s.tools
	if cfg != s.cfg {
		tools = newToolBook(cfg) // settings of its own: a book of its own
	}
	ss := newSessionOf(tools, out, s.activity)
	ss.reg.log, ss.reg.session = s.jobLog, kind+"-"+strconv.FormatInt(s.opened.Add(1), 10)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errServerClosing
	}
	s.sessions[ss] = struct{}{}
	return ss, nil
}

// processFigures is what a transport may report of the process (HTTP's
// /healthz and /metrics), so that transports need not reach the job core.
type processFigures struct {
	sharedJobs    int64 // jobs running in shared sessions
	residentBytes int64 // the process's resident memory
	openFds       int   // the process's open descriptors
}

// figures reads the process's figures now.
func (s *server) figures() processFigures {
	return processFigures{sharedJobs: s.shared.count(), residentBytes: int64(residentKiB()) * 1024, openFds: countOpenFds()}
}

// end ends one session: its blocked calls answer -32800, its jobs' trees
// get TERM and then KILL, and its requests get a moment to reply; other
// sessions are untouched. It returns within about teardownGraceDuration+2s.
func (s *server) end(ss *session) {
	s.mu.Lock()
	delete(s.sessions, ss)
	s.mu.Unlock()
	endSessions([]*session{ss}, false)
}

// shutdown ends every session as end does and refuses new ones; a server
// owning the process also ends orphans that left their job's group.
func (s *server) shutdown() {
	s.mu.Lock()
	s.closing = true
	sessions := slices.Collect(maps.Keys(s.sessions))
	s.sessions = map[*session]struct{}{}
	s.mu.Unlock()
	endSessions(sessions, s.ownsProcess)
	if s.ownsProcess {
		closeTrees()
	}
	removeJobTemps()
	removeSpill()
	s.jobLog.flush(shutdownKillDuration) // the ends of the jobs just torn down, before the process exits
}

// endSessions cancels sessions' requests, tears their jobs (and with sweep
// every descendant) down and gives the requests time to reply: each may be
// tearing its own job down, which takes up to two grace periods from the
// cancel.
// A call read before the end may start its job after the first look at the
// registries: once the requests have replied (or had their time), a second
// look tears down the jobs that appeared meanwhile.
func endSessions(sessions []*session, sweep bool) {
	seen := map[*job]bool{}
	newJobs := func() []*job {
		var jobs []*job
		for _, ss := range sessions {
			for _, j := range append(ss.reg.list(), ss.reg.lingeringJobs()...) {
				if !seen[j] {
					seen[j] = true
					jobs = append(jobs, j)
				}
			}
		}
		return jobs
	}
	cancelled := time.Now()
	for _, ss := range sessions {
		ss.cancelAll()
	}
	terminateAll(newJobs(), sweep)
	replied := make(chan struct{}) // closed once every session's requests have replied
	go func() {
		for _, ss := range sessions {
			ss.handlers.Wait()
		}
		close(replied)
	}()
	// A cancelled execute tears its own job down before it answers (TERM,
	// a grace, KILL, a grace, from when it was cancelled), and sees the job
	// end only once its result settles, which can come a while after the
	// group is gone on a slow machine: its time counts from the cancel, not
	// from the end of terminateAll.
	answered := cancelled.Add(2*teardownGraceDuration + shutdownKillDuration)
	waitFor(replied, max(shutdownKillDuration, time.Until(answered)))
	terminateAll(newJobs(), sweep)
}

// watchSignals subscribes to the signals that end the server: always, as
// PID 1 ignores an unhandled SIGTERM. SIGPIPE makes a vanished client EPIPE,
// not death. A SIGHUP or SIGINT ignored at start (nohup) stays without
// effect, yet is handled: a child would inherit an ignored one.
func watchSignals() <-chan os.Signal {
	ignored := map[os.Signal]bool{}
	for _, sig := range []os.Signal{syscall.SIGHUP, syscall.SIGINT} {
		ignored[sig] = signal.Ignored(sig) // only true before Notify takes it over
	}
	arrived := make(chan os.Signal, 4) // carries every subscribed signal
	signal.Notify(arrived, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	return stoppingSignals(arrived, ignored)
}

// stoppingSignals passes on the first signal from arrived that is not in
// ignored; later ones are dropped, shutdown having begun.
func stoppingSignals(arrived <-chan os.Signal, ignored map[os.Signal]bool) <-chan os.Signal {
	stop := make(chan os.Signal, 1) // carries the signal that ends the server
	go func() {
		for sig := range arrived {
			if !ignored[sig] {
				offer(stop, sig)
			}
		}
	}()
	return stop
}

// prepareProcess readies the process to own children: inherited descriptors
// stay out of jobs, orphans come back to us for reaping, and the reaper runs
// once a child or an orphan can exist.
// With undumpable (serverUndumpable) its /proc files are root's, so jobs
// running as its user can neither list nor open its descriptors.
func prepareProcess(undumpable bool) {
	closeInheritedOnExec()
	if err := hideFromJobs("MCP_EXEC_", undumpable); err != nil {
		logf("%v", err)
	}
	if os.Getpid() != 1 {
		ok, err := becomeSubreaper()
		if err != nil {
			logf("cannot become a child subreaper (%v); orphans go to the system's init", err)
		}
		orphansReturn.Store(ok)
	} else {
		orphansReturn.Store(true)
	}
	if os.Getpid() == 1 || hasChildren() {
		// Orphans may come back to us before any job: as PID 1 from
		// anywhere, else from children we had before our exec. Otherwise
		// the first spawn starts the reaper (spawnNotify).
		children.startReaper()
	}
}

// shutdownSweepDuration bounds a teardown of sessions' jobs from its TERM:
// after the grace, KILL goes to whatever is found, again and again, for
// the rest of it.
const shutdownSweepDuration = teardownGraceDuration + 3*time.Second

// terminateAll sends TERM to every job's tree (and with sweep to every
// descendant), gives them the grace, then KILLs whatever is left, looking
// again until nothing is or shutdownSweepDuration passes (see endTrees).
// A sweep says on stderr how long it took, and any teardown what it left.
// With no job and no child it returns at once, having read nothing.
func terminateAll(jobs []*job, sweep bool) {
	sweep = sweep && hasChildren()
	if len(jobs) == 0 && !sweep {
		return
	}
	left, took := endTrees(jobs, sweep, teardownGraceDuration, shutdownSweepDuration)
	switch {
	case len(left) > 0:
		logf("ending %d job(s): %s still alive after %v", len(jobs), namedProcesses(left), took.Round(time.Millisecond))
	case sweep:
		logf("shutdown: every process the server started is gone (%d job(s), %v)", len(jobs), took.Round(time.Millisecond))
	}
}
