package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/docstream/docstream/agent"
	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/cluster"
	"github.com/docstream/docstream/gateway"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/store"
)

// serve runs the gateway until ctx ends, then shuts down gracefully: it
// stops accepting, lets streams finish within the drain timeout, then ends
// them with done and stops the agents.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("docstream", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "the configuration file (default ./config.yaml when present)")
	addr := fs.String("addr", "", "the address to listen on (default 127.0.0.1:8080)")
	demo := fs.Bool("demo", false, "run the built-in cursor-agent simulator as the agent")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: docstream [--config FILE] [--addr HOST:PORT] [--demo] [--version]")
		fmt.Fprintln(stderr, "       docstream translate [--stream] < transcript.ndjson")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{error: err, reported: true}
	}
	if *version {
		v, rev, gov := metrics.Build()
		fmt.Fprintf(stdout, "docstream %s (revision %s, %s)\n", v, rev, gov)
		return nil
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usageError{error: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	path := *configPath
	if path == "" {
		if _, err := os.Stat("config.yaml"); err == nil {
			path = "config.yaml"
		}
	}
	cfg, err := LoadConfig(path, getenv)
	if err != nil {
		return configError(err)
	}
	if *addr != "" {
		cfg.Server.Addr = *addr
	}
	log := newLogger(cfg.Log, stderr)
	for _, name := range unknownEnv(os.Environ()) {
		ev, msg := log.Warn().Str("variable", name), "unknown environment variable "+name+" is ignored"
		if near := closest(name, settingEnv); near != "" {
			ev, msg = ev.Str("suggestion", near), msg+"; did you mean "+near+"?"
		}
		ev.Msg(msg)
	}
	if *demo {
		// The agent is the built-in simulator, on a temporary workspace.
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the docstream binary for the simulator: %w", err)
		}
		dir, err := os.MkdirTemp("", "docstream-demo-")
		if err != nil {
			return fmt.Errorf("creating the demo workspace: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.Demo, cfg.Agent.Binary = true, exe
		cfg.Agent.ArgsPrefix = []string{"agent-sim"} // realistic pacing; DOCSTREAM_SIM_SPEED changes it
		cfg.Agent.Workspaces, cfg.Agent.DefaultWorkspace = map[string]string{"demo": dir}, "demo"
		log.Warn().Str("agent", "simulator").Msg("demo mode: the agent is Docstream's built-in cursor-agent simulator, not the real cursor-agent")
	}
	if !cfg.Auth.HasKeys() {
		log.Warn().Msg("auth is off: no API keys are configured (auth.api_keys / DOCSTREAM_AUTH_API_KEYS); anyone who reaches the port can run the agent")
		if slices.Contains(cfg.Server.CORSOrigins, "*") {
			log.Warn().Msg(`server.cors_origins is "*" and auth is off: any web page open in a browser that reaches the port can run the agent`)
		}
	}
	dataDir := ""
	if cfg.Store.Driver == "sqlite" {
		if err := store.CheckPath(cfg.Store.Path); err != nil {
			return configError(err)
		}
		dataDir = store.DataDir(cfg.Store.Path)
		lock, err := store.LockDataDir(dataDir)
		if err != nil {
			return err
		}
		defer lock.Close()
	}
	st, err := store.Open(ctx, cfg.Store)
	if err != nil {
		if cfg.Store.Driver == "postgres" {
			return usageError{error: fmt.Errorf("store: PostgreSQL cannot be used: %w", err)}
		}
		return err
	}
	defer st.Close()
	var cl *cluster.Cluster
	if pg, ok := st.(*store.PostgresStore); ok {
		if cl, err = cluster.Join(ctx, cfg.Cluster, pg, log); err != nil {
			return usageError{error: fmt.Errorf("cluster: %w", err)}
		}
	}
	pidDir, home := "", ""
	if dataDir != "" {
		pidDir, home = filepath.Join(dataDir, "agents"), agent.HomeMark(dataDir)
		if err := store.WritableDir(pidDir); err != nil {
			return fmt.Errorf("agents left running by a crash are recorded in %s: %w", pidDir, err)
		}
		if n := agent.ReapOrphans(pidDir, home); n > 0 {
			log.Warn().Int("process_groups", n).Msg("ended agents left running by the last crash")
		}
	}
	// In a cluster the replicas mark the runs of one that stopped instead.
	if cl == nil {
		if n, err := st.MarkInterrupted(ctx); err != nil {
			log.Warn().Err(err).Msg("marking interrupted runs")
		} else if n > 0 {
			log.Warn().Int("runs", n).Msg("marked runs interrupted by the last shutdown")
		}
	}
	if cfg.Store.MaxAge > 0 {
		pruneCtx, stopPruning := context.WithCancel(ctx)
		defer stopPruning()
		go store.PruneEvery(pruneCtx, st, cfg.Store.MaxAge, log)
	}
	m := metrics.New()
	for name, a := range cfg.OpenAI.Aliases {
		m.KnowModels(name, a.Model)
	}
	cli := agent.New(cfg.Agent, os.Environ(), m)
	cli.PidDir, cli.Home, cli.Log = pidDir, home, log
	if err := cli.Ready(); err != nil {
		log.Warn().Err(err).Msg("the agent binary is not ready; /readyz reports it")
	}
	backends := map[string]runs.Backend{"cli": cli}
	var cc *cloud.Client
	if cfg.Cloud.APIKey != "" {
		if cc, err = cloud.New(cfg.Cloud.BaseURL, cfg.Cloud.APIKey); err != nil {
			return fmt.Errorf("cloud backend: %w", err)
		}
		backends["cloud"] = &cloud.Backend{Client: cc, Interval: cfg.Cloud.PollInterval,
			RunTimeout: cfg.Agent.RunTimeout, IdleTimeout: cfg.Agent.IdleTimeout}
	}
	reg := runs.NewRegistry(cfg.Runs, cfg.Limits, runs.Deps{Backends: backends, Store: st, Metrics: m, Log: log,
		MaxLine: cfg.Agent.MaxLineBytes, Redactor: runs.NewRedactor(secrets(cfg)...)})
	srv, err := gateway.NewServer(gateway.Deps{
		Config: gateway.Config{Server: cfg.Server, Auth: cfg.Auth, OpenAI: cfg.OpenAI, Agent: cfg.Agent,
			CloudDefault: cfg.Cloud.Default, CloudRequestTimeout: cfg.Cloud.RequestTimeout, Demo: cfg.Demo},
		Logger: log, Registry: reg, Store: st, Metrics: m, Agent: cli, Cloud: cc, Cluster: cl})
	if err != nil {
		return configError(err)
	}
	ln, err := net.Listen("tcp", cfg.Server.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Server.Addr, err)
	}
	ln, maxConns := srv.Limit(ln, cfg.Limits)
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	log.Info().Str("addr", ln.Addr().String()).Str("agent", cli.Binary()).Bool("demo", cfg.Demo).
		Str("store", cfg.Store.Driver).Int("max_connections", maxConns).Msg("docstream listening")
	fmt.Fprintf(stdout, "docstream listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info().Dur("drain", cfg.Server.ShutdownTimeout).Msg("shutting down: draining streams (a second signal ends the runs now)")
	// A second signal cuts the drain short: the runs end at once, with
	// their shutdown error, and the process exits as it would at the end of
	// the drain.
	again, stopAgain := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stopAgain()
	drain, cancel := context.WithTimeout(again, cfg.Server.ShutdownTimeout)
	defer cancel()
	stopLog := context.AfterFunc(again, func() { log.Warn().Msg("second signal: ending the runs now") })
	defer stopLog()
	var ending sync.WaitGroup
	ending.Go(func() {
		srv.Shutdown(drain)
		if cl != nil {
			leave, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cl.Leave(leave)
			cancel()
		}
	})
	final, cancel2 := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout+10*time.Second)
	defer cancel2()
	err = hs.Shutdown(final)
	ending.Wait()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}

// newLogger returns a JSON logger, or a console one on a terminal.
func newLogger(cfg LogConfig, w io.Writer) zerolog.Logger {
	level, err := zerolog.ParseLevel(strings.ToLower(cfg.Level))
	if err != nil || cfg.Level == "" {
		level = zerolog.InfoLevel
	}
	out := w
	f, ok := w.(*os.File)
	tty := ok && isatty.IsTerminal(f.Fd())
	if cfg.Format == "console" || (cfg.Format == "auto" || cfg.Format == "") && tty {
		// Colours only on a terminal: in a file they are escape codes.
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: time.Kitchen, NoColor: !tty}
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// secrets are the values no run may send or store: the agent's key and
// header values, the cloud key and the client API keys given in plain.
func secrets(cfg Config) []string {
	out := append(cfg.Agent.Secrets(), cfg.Cloud.APIKey, cfg.Cluster.Secret)
	for _, k := range cfg.Auth.APIKeys {
		if !strings.HasPrefix(strings.TrimSpace(k), "sha256:") {
			out = append(out, k)
		}
	}
	return out
}
