package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// lifePairs is how many lives of the server and of the floor program are
// timed, in turns.
const lifePairs = 30

// initializeLine is the one request of a timed life.
const initializeLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}` + "\n"

// life is what one process's life cost: spawn to its first reply line,
// spawn to its exit after stdin closed, and the CPU it used (user+sys,
// from its rusage).
type life struct {
	reply, whole, cpu time.Duration
}

// benchLife times lifePairs lives of the server against as many of the
// floor program (bench/floor, built here as the release is built) and of
// the floor linking net/http and crypto/tls (its linked tag), interleaved
// with the order rotated each turn, and reports the medians: the
// initialize reply, the whole life's wall time and its CPU. The targets are
// against the plain floor; each row's note gives the ratio to the linked
// one, the part of the cost that is the server's own work.
func benchLife(bin string) []row {
	floorBin, linkedBin := buildFloor(""), buildFloor("linked")
	defer os.RemoveAll(filepath.Dir(floorBin))
	defer os.RemoveAll(filepath.Dir(linkedBin))
	var ours, floor, linked []life
	for i := 0; i < lifePairs; i++ {
		turn := []func(){
			func() { ours = append(ours, liveOnce(bin)) },
			func() { floor = append(floor, liveOnce(floorBin)) },
			func() { linked = append(linked, liveOnce(linkedBin)) },
		}
		for k := range turn {
			turn[(i+k)%len(turn)]()
		}
	}
	pick := func(ls []life, f func(life) time.Duration) time.Duration {
		d := make([]time.Duration, len(ls))
		for i, l := range ls {
			d[i] = f(l)
		}
		return median(d)
	}
	ratioRow := func(name string, f func(life) time.Duration, target float64) row {
		v, fl, ln := pick(ours, f), pick(floor, f), pick(linked, f)
		r := float64(v) / float64(fl)
		note := fmt.Sprintf("%.2fx a floor linking net/http and crypto/tls (%.3fms)", float64(v)/float64(ln), ms(ln))
		return row{Name: name, Value: ms(v), Floor: ms(fl), Unit: "ms", Ratio: r, Target: fmt.Sprintf("<= %.1f", target), Pass: r <= target, Note: note}
	}
	return []row{
		ratioRow("initialize reply", func(l life) time.Duration { return l.reply }, 1.1),
		ratioRow("whole life", func(l life) time.Duration { return l.whole }, 1.2),
		ratioRow("whole life CPU", func(l life) time.Duration { return l.cpu }, 1.2),
	}
}

// buildFloor builds bench/floor with the release's flags and the build tags
// given into a temporary directory and returns the binary's path.
func buildFloor(tags string) string {
	dir, err := os.MkdirTemp("", "mcp-exec-bench-floor-")
	check(err)
	out := filepath.Join(dir, "floor")
	cmd := exec.Command("go", "build", "-tags", tags, "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid=", "-o", out, "./floor")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	check(cmd.Run())
	return out
}

// liveOnce runs one life of bin: spawn, the initialize request, its reply
// line, stdin closed, exit.
func liveOnce(bin string) life {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "SHELL=/bin/sh")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	check(err)
	outPipe, err := cmd.StdoutPipe()
	check(err)
	out := bufio.NewReader(outPipe)
	t := time.Now()
	check(cmd.Start())
	_, err = io.WriteString(in, initializeLine)
	check(err)
	_, err = out.ReadBytes('\n')
	check(err)
	reply := time.Since(t)
	check(in.Close())
	_, _ = io.Copy(io.Discard, out) // anything after the reply, until the server closes stdout
	check(cmd.Wait())
	whole := time.Since(t)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	return life{reply: reply, whole: whole, cpu: cpu}
}
