package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/docstream/docstream/agent"
	"github.com/docstream/docstream/gateway"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/store"
	"github.com/docstream/docstream/translate"
)

// maxLineBytes is agent.max_line_bytes at its default.
const maxLineBytes = agent.DefaultMaxLineBytes

// benchBackend is a runs.Backend without a child: a run's lines are written
// by writeBenchLines into a pipe and read back as an agent's stdout is.
type benchBackend struct{}

var _ runs.Backend = benchBackend{}

// Run feeds seg the lines of the run's prompt until the result, or until
// ctx ends the run.
func (benchBackend) Run(ctx context.Context, spec *runs.Spec, seg *translate.Segmenter) translate.End {
	start := time.Now()
	r, w, err := os.Pipe()
	if err != nil {
		return translate.End{Err: fmt.Errorf("creating a pipe: %w", err), Elapsed: time.Since(start).Milliseconds()}
	}
	stop := startSource(w, spec.Prompt, spec.Workspace)
	unhook := context.AfterFunc(ctx, func() { r.Close() })
	dec := translate.NewDecoder(r, maxLineBytes)
	var readErr error
	for !seg.Done() {
		ev, err := dec.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				readErr = err
			}
			break
		}
		seg.Feed(ev)
	}
	unhook()
	r.Close()
	stop()
	end := translate.End{Exited: true, Elapsed: time.Since(start).Milliseconds()}
	switch {
	case seg.Done():
	case ctx.Err() != nil:
		end.Reason, end.Message, _ = runs.StopCause(ctx)
	case readErr != nil:
		end.Err = fmt.Errorf("reading the agent's output: %w", readErr)
	}
	return end
}

// gatewayServeConfig is what the -gateway-serve mode is started with.
type gatewayServeConfig struct {
	Workspace string
	Streams   int     // the streams the case opens at once
	Spawn     float64 // limits.spawn_per_second; < 0: the default, 20
	Store     string  // the SQLite store's path; "": the in-memory store
}

// serveGateway is the hidden -gateway-serve mode: Docstream's gateway with
// benchBackend as its "cli" backend, in a process of its own, with the
// settings the bench gives the real binary. It prints its address, then
// serves until stdin closes or a signal arrives.
func serveGateway(c gatewayServeConfig) error {
	ctx := context.Background()
	log := zerolog.New(os.Stderr).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	sc := store.Config{Driver: "memory", MemoryMaxBytes: 256 << 20}
	if c.Store != "" {
		sc = store.Config{Driver: "sqlite", Path: c.Store}
	}
	st, err := store.Open(ctx, sc)
	if err != nil {
		return err
	}
	defer st.Close()
	m := metrics.New()
	// The agent backend only answers /readyz: the runs go to benchBackend.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cli := agent.New(agent.Config{Binary: self}, nil, m)
	lim := max(c.Streams, 64) + 16
	spawn := c.Spawn
	if spawn < 0 {
		spawn = 20
	}
	limits := runs.Limits{MaxConcurrentRuns: lim, QueueSize: lim, QueueTimeout: time.Minute, SpawnPerSecond: spawn}
	reg := runs.NewRegistry(
		runs.Config{KeepFinished: 15 * time.Minute, KeepFinishedBytes: 256 << 20, LogMaxEvents: 200000, LogMaxBytes: 128 << 20},
		limits, runs.Deps{Backends: map[string]runs.Backend{"cli": benchBackend{}}, Store: st, Metrics: m, Log: log, MaxLine: maxLineBytes})
	srv, err := gateway.NewServer(gateway.Deps{
		Config: gateway.Config{
			Server: gateway.ServerConfig{ReadHeaderTimeout: 10 * time.Second, ReadBodyTimeout: 30 * time.Second,
				WriteTimeout: 30 * time.Second, Heartbeat: 15 * time.Second, MaxBodyBytes: 4 << 20, MaxPromptBytes: gateway.MaxArgBytes},
			OpenAI: openai.Config{Render: "markdown", Reasoning: "reasoning_content"},
			Agent:  agent.Config{Workspaces: map[string]string{"main": c.Workspace}, DefaultWorkspace: "main"},
		},
		Logger: log, Registry: reg, Store: st, Metrics: m, Agent: cli})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ln, _ = srv.Limit(ln, limits)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	fmt.Printf("docstream listening on http://%s\n", ln.Addr())
	go func() {
		waitForEnd()
		drain, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(drain)
		_ = hs.Shutdown(drain)
		hs.Close()
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// waitForEnd returns once stdin closes or SIGTERM or SIGINT arrives.
func waitForEnd() {
	end := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		end <- struct{}{}
	}()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sigs
		end <- struct{}{}
	}()
	<-end
}
