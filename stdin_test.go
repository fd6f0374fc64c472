package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStdin covers input: a large write to a reader, a blocked write that is
// cancelled, and the errors after close and after exit.
func TestStdin(t *testing.T) {
	t.Parallel()
	reg := newRegistry(testConfig())

	t.Run("200 KB to wc -c", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "wc -c")
		data := strings.Repeat("0123456789abcdef", 200*1024/16)
		if err := j.input(plainWaiter(), data, false); err != nil {
			t.Fatal(err)
		}
		if err := j.input(plainWaiter(), "", true); err != nil {
			t.Fatal(err)
		}
		r := resultOf(collect(t, reg, j))
		if r.Stdout == nil || strings.TrimSpace(r.Stdout.Data) != "204800" {
			t.Errorf("wc -c after 200 KB: %+v", r.Stdout)
		}
	})

	t.Run("blocked write is cancelled", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "sleep 60")
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			err := j.input(&waiter{ctx: ctx}, strings.Repeat("x", 4<<20), false)
			errc <- err
		}()
		// The writer holds stdin's token while it writes; 4 MiB cannot fit
		// in a pipe nobody reads, so holding it means being blocked.
		eventually(t, 10*time.Second, "the write is under way", func() bool { return len(j.stdin.token) == 0 })
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, errCancelled) {
				t.Errorf("cancelled input: %v, want errCancelled", err)
			}
		case <-time.After(jobDeadline):
			t.Fatal("a cancelled input did not return")
		}
		if j.terminal() {
			t.Errorf("the job ended when its input was cancelled")
		}
		if r := statusOf(j); r.State != stateRunning {
			t.Errorf("status after a cancelled input: %+v", r)
		}
	})

	t.Run("input after close", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "sleep 60")
		if err := j.input(plainWaiter(), "a", true); err != nil {
			t.Fatal(err)
		}
		for _, data := range []string{"b", ""} {
			err := j.input(plainWaiter(), data, false)
			checkMentions(t, "input after close", err, []string{"already closed"})
		}
	})

	t.Run("input after exit", func(t *testing.T) {
		t.Parallel()
		j := startJob(t, reg, "exit 0")
		awaitDone(t, j)
		err := j.input(plainWaiter(), "x", false)
		checkMentions(t, "input after exit", err, []string{"no longer running"})
	})

	t.Run("execute's stdin with close_stdin", func(t *testing.T) {
		t.Parallel()
		j := startReq(t, reg, startRequest{command: "cat", stdin: "hello", closeStdin: true, policy: defaultCapture})
		if r := resultOf(collect(t, reg, j)); r.Stdout == nil || r.Stdout.Data != "hello" {
			t.Errorf("cat of execute's stdin: %+v", r.Stdout)
		}
	})

}
