package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Exit codes of the CLI.
const (
	exitOK      = 0
	exitFailure = 1
	exitSIGINT  = 130
	exitSIGTERM = 143
)

// options are the process-level effects of Main, replaceable in tests.
type options struct {
	// signals makes Main handle SIGTERM and SIGINT itself.
	signals bool
	// environ lists the environment as KEY=value strings.
	environ func() []string
	// getwd returns the process working directory.
	getwd func() (string, error)
	// now is the clock.
	now func() time.Time
	// ignoreTerm makes the process ignore SIGTERM (fault:ignore-term).
	ignoreTerm func()
	// killSelf ends the process with SIGKILL (fault:exit-signal).
	killSelf func()
	// startChild starts a long-lived child that holds stdout and stderr
	// (fault:grandchild).
	startChild func(stdout, stderr io.Writer) error
	// exit ends the process when a signalled run does not stop within
	// signalGrace (for example while a write to a full pipe blocks). Nil
	// disables it.
	exit func(code int)
	// oneProcPaced runs a paced simulator (speed > 0) on one processor
	// unless GOMAXPROCS is set.
	oneProcPaced bool
}

// signalGrace is how long a run may take to stop after SIGTERM or SIGINT
// before the process exits anyway, as the CLI does.
const signalGrace = 2 * time.Second

func processOptions() options {
	return options{
		signals:    true,
		environ:    os.Environ,
		getwd:      os.Getwd,
		now:        time.Now,
		ignoreTerm: func() { signal.Ignore(syscall.SIGTERM) },
		killSelf: func() {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Second)
		},
		startChild:   startSleepChild,
		exit:         os.Exit,
		oneProcPaced: true,
	}
}

// startSleepChild starts `sleep 3600` in the same process group with stdout
// and stderr inherited (when they are files) and does not wait for it.
func startSleepChild(stdout, stderr io.Writer) error {
	bin, err := exec.LookPath("sleep")
	if err != nil {
		return fmt.Errorf("find sleep: %w", err)
	}
	cmd := exec.Command(bin, "3600")
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	if err := cmd.Process.Release(); err != nil {
		return fmt.Errorf("release child: %w", err)
	}
	return nil
}

// Main runs the simulator with cursor-agent's command line and returns the process exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return mainWith(ctx, args, stdin, stdout, stderr, getenv, processOptions())
}

// lockedWriter serializes writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// signalCause is the cancellation cause when a signal stops the run.
type signalCause struct{ sig os.Signal }

func (c signalCause) Error() string { return "received " + c.sig.String() }

// session is one invocation: parsed flags, the chosen scenario and the run.
type session struct {
	cfg             *config
	sel             selection
	run             *run
	opts            options
	stdout          io.Writer
	stderr          io.Writer
	promptFromStdin bool
	apiKeySource    string
}

// begin writes system/init and the user echo.
func (s *session) begin() error {
	mode := "default"
	if s.cfg.force {
		mode = "bypassPermissions"
	}
	return s.run.begin(s.apiKeySource, s.cfg.model.Name, mode)
}

func mainWith(parent context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, opts options) int {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	stderr = &lockedWriter{w: stderr}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	finished := make(chan struct{})
	defer close(finished)
	if opts.signals {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(sigs)
		go func() {
			select {
			case sig := <-sigs:
				cancel(signalCause{sig})
				if opts.exit == nil {
					return
				}
				t := time.NewTimer(signalGrace)
				defer t.Stop()
				select {
				case <-t.C:
					code := exitSIGTERM
					if sig == syscall.SIGINT {
						code = exitSIGINT
					}
					opts.exit(code)
				case <-finished:
				}
			case <-ctx.Done():
			}
		}()
	}

	cfg, err := parseArgs(args)
	if err == nil && !cfg.speedSet {
		if v := getenv(SpeedEnv); v != "" {
			cfg.speed, err = parseSpeed(v)
			if err != nil {
				err = &usageError{"error: " + SpeedEnv + ": " + err.Error()}
			}
		}
	}
	if err != nil {
		writeLog(getenv, opts, args, "")
		fmt.Fprintln(stderr, err)
		return exitFailure
	}
	if opts.oneProcPaced && cfg.speed > 0 && getenv("GOMAXPROCS") == "" {
		// Paced, the simulator is one event loop, as the CLI is: a second
		// processor only adds thread wake-ups to every event. Unpaced, it
		// keeps both for its encoding and collector.
		runtime.GOMAXPROCS(1)
	}
	switch {
	case cfg.help:
		writeLog(getenv, opts, args, "")
		_, _ = io.WriteString(stdout, helpText)
		return exitOK
	case cfg.version:
		writeLog(getenv, opts, args, "")
		_, _ = io.WriteString(stdout, Version+"\n")
		return exitOK
	case cfg.listModels || (!cfg.dashdash && len(cfg.positional) > 0 && cfg.positional[0] == "models"):
		writeLog(getenv, opts, args, "")
		_, _ = io.WriteString(stdout, modelList())
		return exitOK
	}

	if !cfg.dashdash && len(cfg.positional) == 1 && cfg.positional[0] == "acp" {
		writeLog(getenv, opts, args, "")
		return serveACP(ctx, cfg, stdin, stdout, stderr, getenv, opts)
	}

	cwd, err := workingDir(cfg.workspace, opts)
	if err != nil {
		writeLog(getenv, opts, args, "")
		fmt.Fprintln(stderr, err)
		return exitFailure
	}

	prompt, fromStdin, err := readPrompt(ctx, cfg, stdin)
	writeLog(getenv, opts, args, prompt)
	if err != nil {
		if ctx.Err() != nil {
			return cancelCode(ctx, stderr)
		}
		fmt.Fprintln(stderr, err)
		return exitFailure
	}

	sel := selectScenario(prompt, cfg.mode)
	if name := strings.TrimSpace(getenv(ScenarioEnv)); name != "" {
		forced, ok := scenarioByWord(strings.ToLower(name))
		if !ok {
			fmt.Fprintf(stderr, "error: %s: unknown scenario %q\n", ScenarioEnv, name)
			return exitFailure
		}
		sel = forced
	}

	format := cfg.outputFormat
	requestID := newUUID()
	sessionID := cfg.resume
	if sessionID == "" {
		sessionID = newUUID()
	}
	now := opts.now
	if now == nil {
		now = time.Now
	}
	s := &session{
		cfg:             cfg,
		sel:             sel,
		opts:            opts,
		stdout:          stdout,
		stderr:          stderr,
		promptFromStdin: fromStdin,
		apiKeySource:    apiKeySource(cfg, getenv),
		run: &run{
			ctx:       ctx,
			out:       stdout,
			format:    format,
			partial:   cfg.partial && format == "stream-json",
			speed:     cfg.speed,
			now:       now,
			sessionID: sessionID,
			requestID: requestID,
			prompt:    prompt,
			cwd:       cwd,
			start:     now(),
		},
	}
	code, err := sel.play(s)
	if err != nil {
		if ctx.Err() != nil {
			return cancelCode(ctx, stderr)
		}
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitFailure
	}
	return code
}

// cancelCode reports a cancelled run the way the CLI exits on a signal.
func cancelCode(ctx context.Context, stderr io.Writer) int {
	var sc signalCause
	if errors.As(context.Cause(ctx), &sc) && sc.sig == syscall.SIGINT {
		fmt.Fprintln(stderr, "Aborting operation...")
		return exitSIGINT
	}
	return exitSIGTERM
}

// apiKeySource is what system/init reports as apiKeySource.
func apiKeySource(cfg *config, getenv func(string) string) string {
	switch {
	case cfg.apiKeyFlag:
		return "flag"
	case getenv("CURSOR_API_KEY") != "":
		return "env"
	}
	return "login"
}

// workingDir resolves --workspace (which must be a directory) or the process
// working directory to an absolute path.
func workingDir(workspace string, opts options) (string, error) {
	if workspace == "" {
		wd, err := opts.getwd()
		if err != nil {
			return "", fmt.Errorf("Error: cannot determine the working directory: %w", err)
		}
		return wd, nil
	}
	abs, err := filepath.Abs(workspace)
	if err != nil {
		return "", fmt.Errorf("Error: invalid workspace %q: %w", workspace, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("Error: Workspace directory does not exist: %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("Error: Workspace is not a directory: %s", abs)
	}
	return abs, nil
}

// readPrompt returns the prompt: the words after `--`, else the positional
// words, else stdin read to EOF. stdin is not touched when arguments hold the prompt.
func readPrompt(ctx context.Context, cfg *config, stdin io.Reader) (prompt string, fromStdin bool, err error) {
	if cfg.dashdash && len(cfg.promptArgs) > 0 {
		return strings.Join(cfg.promptArgs, " "), false, nil
	}
	if len(cfg.positional) > 0 {
		return strings.Join(cfg.positional, " "), false, nil
	}
	if stdin == nil {
		return "", false, errors.New(noPromptMessage)
	}
	type readResult struct {
		b   []byte
		err error
	}
	ch := make(chan readResult, 1)
	go func() {
		b, err := io.ReadAll(stdin)
		ch <- readResult{b, err}
	}()
	select {
	case <-ctx.Done():
		return "", false, ctx.Err()
	case res := <-ch:
		if res.err != nil {
			return "", false, fmt.Errorf("Error: read prompt from stdin: %w", res.err)
		}
		if strings.TrimSpace(string(res.b)) == "" {
			return "", true, errors.New(noPromptMessage)
		}
		return string(res.b), true, nil
	}
}

const noPromptMessage = "Error: No prompt provided. Pass a prompt as an argument or on stdin."

// logEntry is one line of the DOCSTREAM_SIM_LOG file.
type logEntry struct {
	Argv      []string `json:"argv"`
	Prompt    string   `json:"prompt"`
	Cwd       string   `json:"cwd"`
	Env       []string `json:"env"`
	Pid       int      `json:"pid"`
	Workspace string   `json:"workspace,omitempty"`
}

// writeLog appends one JSON line describing this start to the file named by
// DOCSTREAM_SIM_LOG, if set. The line is written with a single append so that
// parallel simulators do not interleave.
func writeLog(getenv func(string) string, opts options, args []string, prompt string) {
	path := getenv(LogEnv)
	if path == "" {
		return
	}
	var names []string
	for _, kv := range opts.environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if names == nil {
		names = []string{}
	}
	cwd, _ := opts.getwd()
	entry := logEntry{Argv: append([]string{}, args...), Prompt: prompt, Cwd: cwd, Env: names, Pid: os.Getpid()}
	if cfg, err := parseArgs(args); err == nil && cfg.workspace != "" {
		entry.Workspace, _ = filepath.Abs(cfg.workspace)
	}
	b, err := json.Marshal(entry)
	if err != nil {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	_, _ = f.Write(append(b, '\n'))
	_ = f.Close()
}
