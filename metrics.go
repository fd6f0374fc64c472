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

// Process-wide state: counters served as Prometheus text by the HTTP
// transport's /metrics. The job registry writes the job counts, the pumps
// outputBytes and the HTTP transport httpReplyBytes. Each only ever grows;
// a gauge is computed when it is read.
var (
	jobsStarted       atomic.Int64 // jobs whose start was attempted and admitted
	jobsFailedToStart atomic.Int64 // of those, jobs that could not start
	jobsFinished      atomic.Int64 // jobs whose shell exited
	jobsTimedOut      atomic.Int64 // of those, jobs their time limit ended
	outputBytes       atomic.Int64 // bytes jobs wrote to stdout and stderr
	httpReplyBytes    atomic.Int64 // bytes of replies and notifications sent over HTTP
)

// httpResponses is process-wide state: HTTP responses by status code,
// counted by countResponse as the HTTP transport answers.
var httpResponses = struct {
	mu     sync.Mutex    // guards byCode
	byCode map[int]int64 // responses sent, by status
}{byCode: map[int]int64{}}

// countResponse counts one HTTP response with status code.
func countResponse(code int) {
	httpResponses.mu.Lock()
	httpResponses.byCode[code]++
	httpResponses.mu.Unlock()
}

// metric is one line of /metrics: a name, its help and type, and a value.
type metric struct {
	name, help, kind string
	value            float64
}

// writeMetrics writes the counters, then gauges, in the Prometheus text
// exposition format.
func writeMetrics(w io.Writer, gauges []metric) {
	counters := []metric{
		{"mcp_exec_jobs_started_total", "Jobs started (including those that failed to start).", "counter", float64(jobsStarted.Load())},
		{"mcp_exec_jobs_failed_to_start_total", "Jobs that could not start.", "counter", float64(jobsFailedToStart.Load())},
		{"mcp_exec_jobs_finished_total", "Jobs whose shell exited.", "counter", float64(jobsFinished.Load())},
		{"mcp_exec_jobs_timed_out_total", "Jobs ended by their time limit.", "counter", float64(jobsTimedOut.Load())},
		{"mcp_exec_output_bytes_total", "Bytes jobs wrote to stdout and stderr.", "counter", float64(outputBytes.Load())},
		{"mcp_exec_http_reply_bytes_total", "Bytes of MCP replies and notifications sent over HTTP.", "counter", float64(httpReplyBytes.Load())},
	}
	for _, m := range append(counters, gauges...) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", m.name, m.help, m.name, m.kind, m.name, strconv.FormatFloat(m.value, 'f', -1, 64))
	}
	httpResponses.mu.Lock()
	codes := slices.Sorted(maps.Keys(httpResponses.byCode))
	fmt.Fprintf(w, "# HELP mcp_exec_http_responses_total HTTP responses by status code.\n# TYPE mcp_exec_http_responses_total counter\n")
	for _, c := range codes {
		fmt.Fprintf(w, "mcp_exec_http_responses_total{code=\"%d\"} %d\n", c, httpResponses.byCode[c])
	}
	httpResponses.mu.Unlock()
}
