package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
)

// counters are the counts served as Prometheus text by the HTTP transport's
// /metrics. Each only ever grows; a gauge is computed when it is read. The
// process has one (theProcess.metrics); its responses map must be made
// before use.
type counters struct {
	jobsStarted       atomic.Int64 // jobs whose start was attempted and admitted
	jobsFailedToStart atomic.Int64 // of those, jobs that could not start
	jobsFinished      atomic.Int64 // jobs whose shell exited
	jobsTimedOut      atomic.Int64 // of those, jobs their time limit ended
	outputBytes       atomic.Int64 // bytes jobs wrote to stdout and stderr
	httpReplyBytes    atomic.Int64 // bytes of replies and notifications sent over HTTP

	mu        sync.Mutex    // guards responses; taken alone, and nothing is written under it
	responses map[int]int64 // HTTP responses sent, by status code
}

// countResponse counts one HTTP response with status code.
func (c *counters) countResponse(code int) {
	c.mu.Lock()
	c.responses[code]++
	c.mu.Unlock()
}

// metric is one line of /metrics: a name, its help and type, and a value.
type metric struct {
	name, help, kind string
	value            float64
}

// write writes the counters, then gauges, in the Prometheus text
// exposition format.
func (c *counters) write(w io.Writer, gauges []metric) {
	counts := []metric{
		{"mcp_exec_jobs_started_total", "Jobs started (including those that failed to start).", "counter", float64(c.jobsStarted.Load())},
		{"mcp_exec_jobs_failed_to_start_total", "Jobs that could not start.", "counter", float64(c.jobsFailedToStart.Load())},
		{"mcp_exec_jobs_finished_total", "Jobs whose shell exited.", "counter", float64(c.jobsFinished.Load())},
		{"mcp_exec_jobs_timed_out_total", "Jobs ended by their time limit.", "counter", float64(c.jobsTimedOut.Load())},
		{"mcp_exec_output_bytes_total", "Bytes jobs wrote to stdout and stderr.", "counter", float64(c.outputBytes.Load())},
		{"mcp_exec_http_reply_bytes_total", "Bytes of MCP replies and notifications sent over HTTP.", "counter", float64(c.httpReplyBytes.Load())},
	}
	for _, m := range append(counts, gauges...) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", m.name, m.help, m.name, m.kind, m.name, strconv.FormatFloat(m.value, 'f', -1, 64))
	}
	// A copy, so the writer (a slow client's connection) is not written
	// to under the lock every response takes.
	c.mu.Lock()
	responses := maps.Clone(c.responses)
	c.mu.Unlock()
	fmt.Fprintf(w, "# HELP mcp_exec_http_responses_total HTTP responses by status code.\n# TYPE mcp_exec_http_responses_total counter\n")
	for _, code := range slices.Sorted(maps.Keys(responses)) {
		fmt.Fprintf(w, "mcp_exec_http_responses_total{code=\"%d\"} %d\n", code, responses[code])
	}
}
