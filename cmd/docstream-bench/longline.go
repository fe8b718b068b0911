package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// The long-line row: the gateway at its default settings (but for a line
// limit that lets the line through) runs longLineRuns agents at once, each
// of which writes one assistant line of longLineMiB MiB, and its peak RSS
// is read against their share of the budget docs/operations.md documents:
// 7 × the lines in flight.
const (
	longLineRuns   = 8
	longLineMiB    = 10
	longLineBudget = longLineRuns * 7 * longLineMiB << 20
	longLineLimit  = "≤ 560 MiB, 7 × the lines in flight"
	longLineTitle  = "peak RSS, 8 runs of one 10 MiB line each"
)

// longLineAgent writes an init, one long assistant line and a result.
const longLineAgent = `#!/bin/sh
printf '%s\n' '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-long","model":"auto"}'
printf '{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"'
head -c %d /dev/zero | tr '\0' a
printf '"}]},"session_id":"s-long"}\n'
printf '%s\n' '{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s-long"}'
`

// runLongLine measures the long-line row with the gateway binary bin; it
// returns the gateway's peak RSS (VmHWM) in bytes.
func runLongLine(bin, dir string) (int64, error) {
	agent := filepath.Join(dir, "long-line-agent.sh")
	script := strings.Replace(longLineAgent, "%d", strconv.Itoa(longLineMiB<<20), 1)
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		return 0, err
	}
	ws := filepath.Join(dir, "workspace")
	// The line is longer than agent.max_line_bytes by default, which is
	// raised for it; every other setting is the default.
	c := e2eCase{Defaults: true, Env: []string{"DOCSTREAM_AGENT_MAX_LINE_BYTES=" + strconv.Itoa(16<<20)}}
	srv, err := startGateway(bin, dir, agentSetup{Binary: agent, Workspace: ws}, c)
	if err != nil {
		return 0, err
	}
	defer srv.Stop()
	var wg sync.WaitGroup
	errs := make(chan error, longLineRuns)
	for range longLineRuns {
		wg.Go(func() {
			resp, err := http.Post(srv.URL+"/v1/chat?stream=true", "application/json", strings.NewReader(`{"prompt":"x"}`))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			n, err := io.Copy(io.Discard, resp.Body)
			switch {
			case err != nil:
				errs <- err
			case resp.StatusCode != http.StatusOK || n < longLineMiB<<20:
				errs <- fmt.Errorf("status %d, %d bytes of stream", resp.StatusCode, n)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return statusBytes(srv.Pid(), "VmHWM:")
}

// longLineRow is the long-line row of the bounds table.
func (rep *report) longLineRow() boundRow {
	row := boundRow{Measure: longLineTitle, Where: "–", Relay: "–", Docstream: "not measured", Limit: longLineLimit, Met: "–"}
	switch {
	case rep.LongLineErr != nil:
		row.Docstream = "error: " + rep.LongLineErr.Error()
	case rep.LongLinePeak > 0:
		row.Where, row.Met = "default settings", "met"
		if rep.LongLinePeak > longLineBudget {
			row.Met = "**not met**"
		}
		row.Docstream = fmt.Sprintf("%s (%.2f× the budget)", fmtMiB(float64(rep.LongLinePeak)), float64(rep.LongLinePeak)/longLineBudget)
	}
	return row
}
