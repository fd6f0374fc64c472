package main

import (
	"time"
)

// Every tool contract runs a job the same way: start it (its time limit
// armed as it starts), wait for it as the call asks (cancelled, yielding,
// stopping early), and then either hand its result to the call or, when
// nobody can collect it any more, forget it and tear it down. runJob is
// that one lifecycle; a contract only says what to start, how to wait and
// how to render what it gets back.

// jobRun is one job a call runs: what to start and how to wait for it.
type jobRun struct {
	startRequest
	timeLimit time.Duration // from the start; 0: none
	killGrace time.Duration // between TERM and KILL when the limit ends it (killAtOnce: KILL)
	nowait    bool          // return as soon as the job has started
	await     awaitOptions  // when the wait gives up before the job ends
	until     *untilSpec    // also return, the job running, on a matching line or quiet
	follow    jobFollower   // when set, follows the job beside the wait
}

// jobFollower follows a call's job beside its wait: streams its output,
// say.
type jobFollower interface {
	// followJob begins following j, on the call's goroutine right after
	// the start, and returns finish, which runJob calls once the wait is
	// over, before the result is made or the job torn down; finish
	// returns when the following is done.
	followJob(j *job) (finish func())
}

// ranJob is what runJob leaves its caller.
type ranJob struct {
	job         *job
	started     bool      // false: it could not start, and its outcome says why
	ended       bool      // it finished and was delivered to this call: render its result
	inputWanted bool      // the wait yielded because a process waits for input
	hit         *untilHit // the wait ended early on run.until
}

// runJob starts run and waits for it (with run.until, only until the
// running job meets it: hit says how). A job that could not start comes
// back finished with started false (and no error); one that was started
// but not delivered (nowait, a wait that yielded or ended early) stays in
// the registry, collectable by its id. On an error after the start (the
// call was cancelled, or its client had no room for the reply) nobody can
// collect the job any more: it is forgotten and torn down, and the error
// returned. When ended, the client has room for the reply (see
// roomForReply).
func (c *toolCall) runJob(run jobRun) (ranJob, error) {
	if c.waitToEnd {
		run.await = awaitOptions{} // the call ends with its job
	}
	run.reportPrompts = c.reportsPrompts()
	run.lingers = c.keepsTreesInReach()
	run.trace = c.trace
	j, started, err := c.reg.start(run.startRequest)
	if err != nil || !started {
		return ranJob{job: j}, err
	}
	if run.timeLimit > 0 {
		j.limitTime(run.timeLimit, run.killGrace)
	}
	if c.onStart != nil {
		c.onStart.jobStarted(j)
	}
	if run.nowait {
		return ranJob{job: j, started: true}, nil
	}
	finish := func() {}
	if run.follow != nil {
		finish = run.follow.followJob(j)
	}
	hit := func() *untilHit { return nil }
	if run.until != nil {
		hit = stopOnUntil(*run.until, []*job{j}, &run.await)
	}
	run.await.ownJob = true
	delivered, inputWanted, err := c.reg.await(c.waiter, []*job{j}, run.await)
	finish()
	ended := err == nil && delivered[j.id] != nil
	if ended {
		err = c.roomForReply()
	}
	if err != nil {
		// Only this call knew of the job (or, for execute, held it from the
		// start): whether it still runs or its result waited for room,
		// nobody else will collect it.
		c.reg.forget(j)
		j.teardown(teardownGraceDuration)
		return ranJob{}, err
	}
	return ranJob{job: j, started: true, ended: ended, inputWanted: inputWanted, hit: hit()}, nil
}
