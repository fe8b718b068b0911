package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
)

// relayConfig says what the bare relay runs for each request.
type relayConfig struct {
	Agent     string   // the agent binary, or inProcess
	Prefix    []string // arguments before the agent's own, e.g. agent-sim,--sim-speed=0
	Workspace string   // the agent's working directory
}

// relay is the floor Docstream is measured against: it spawns the same agent
// command the gateway spawns and copies each of its stdout lines, unparsed,
// into an SSE data event, flushing only when nothing more is buffered.
type relay struct{ cfg relayConfig }

// agentArgs is the command line the gateway gives the agent for a prompt
// with the default settings (model auto, mode agent, trust on).
func agentArgs(prefix []string, workspace, prompt string) []string {
	args := append([]string(nil), prefix...)
	args = append(args, "--print", "--output-format", "stream-json", "--stream-partial-output")
	if workspace != "" {
		args = append(args, "--workspace", workspace)
	}
	return append(args, "--trust", "--", prompt)
}

func (rl *relay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/healthz":
		_, _ = io.WriteString(w, `{"status":"ok"}`)
		return
	case r.URL.Path == "/metrics":
		// The two runtime counters of the gateway's /metrics the harness
		// reads, under the same names.
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		_, _ = fmt.Fprintf(w, "go_memstats_alloc_bytes_total %d\ngo_gc_duration_seconds_count %d\n", ms.TotalAlloc, ms.NumGC)
		return
	case r.URL.Path != "/v1/chat" || r.Method != http.MethodPost:
		http.NotFound(w, r)
		return
	}
	var req struct {
		Prompt string `json:"prompt"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil || req.Prompt == "" {
		http.Error(w, `{"error":{"code":"bad_request","message":"send a prompt"}}`, http.StatusBadRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if _, err := io.WriteString(w, ": relay\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	ctx := r.Context()
	src, stop, err := rl.start(ctx, req.Prompt)
	if err != nil {
		_, _ = fmt.Fprintf(w, "event: error\ndata: %q\n\n", err.Error())
		return
	}
	defer stop()
	defer context.AfterFunc(ctx, func() { src.Close() })()
	rl.copyLines(w, rc, src)
}

// copyLines copies each line of src into an SSE data event, flushing only
// when nothing more is buffered.
func (rl *relay) copyLines(w io.Writer, rc *http.ResponseController, src io.Reader) {
	br := bufio.NewReaderSize(src, 64<<10)
	inLine := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			if !inLine {
				_, _ = io.WriteString(w, "data: ")
				inLine = true
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
			continue
		case len(chunk) > 0:
			if !inLine {
				_, _ = io.WriteString(w, "data: ")
			}
			inLine = false
			line := chunk
			if line[len(line)-1] == '\n' {
				line = line[:len(line)-1]
			}
			if _, err := w.Write(line); err != nil {
				return
			}
			if _, err := io.WriteString(w, "\n\n"); err != nil {
				return
			}
		}
		if err != nil {
			_ = rc.Flush()
			return
		}
		if br.Buffered() == 0 {
			if rc.Flush() != nil {
				return
			}
		}
	}
}

// start runs the agent (or the in-process source) and returns its stdout
// and a function that ends it and waits for it.
func (rl *relay) start(ctx context.Context, prompt string) (io.ReadCloser, func(), error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if rl.cfg.Agent == inProcess {
		stop := startSource(pw, prompt, rl.cfg.Workspace)
		return pr, func() { pr.Close(); stop() }, nil
	}
	cmd := exec.Command(rl.cfg.Agent, agentArgs(rl.cfg.Prefix, rl.cfg.Workspace, prompt)...)
	cmd.Dir = rl.cfg.Workspace
	cmd.Stdout = pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	var once sync.Once
	return pr, func() {
		once.Do(func() {
			select {
			case <-exited:
			default:
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			pr.Close()
		})
	}, nil
}

// serveRelay is the hidden -relay-serve mode: the relay as its own process,
// like the gateway, so that its memory and CPU can be measured alike. It
// prints its address, then serves until stdin closes or a signal arrives.
func serveRelay(cfg relayConfig) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: &relay{cfg: cfg}}
	fmt.Printf("relay listening on http://%s\n", ln.Addr())
	go func() {
		waitForEnd()
		srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
