package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// CLIBackend runs cursor-agent (or the simulator) as a subprocess in its own
// process group and feeds its stream-json output to the segmenter.
type CLIBackend struct {
	cfg     AgentConfig
	binary  string
	prefix  []string
	env     []string
	metrics *Metrics
	demo    bool
	// pidDir, when set, holds one file per running agent process group, so
	// that agents left by a crash of the gateway are ended at its next start.
	pidDir string

	probeOnce sync.Once
	hasDebug  bool
}

// NewCLIBackend resolves the agent binary and the agent's environment.
// The binary is agent.binary, else `agent`, else `cursor-agent` on PATH.
func NewCLIBackend(cfg AgentConfig, environ []string, m *Metrics, demo bool) *CLIBackend {
	b := &CLIBackend{cfg: cfg, prefix: cfg.ArgsPrefix, metrics: m, demo: demo}
	b.binary = cfg.Binary
	if b.binary == "" {
		for _, name := range []string{"agent", "cursor-agent"} {
			if p, err := exec.LookPath(name); err == nil {
				b.binary = p
				break
			}
		}
	}
	b.env = agentEnv(environ, cfg)
	return b
}

// Binary returns the agent binary, "" when none was found.
func (b *CLIBackend) Binary() string { return b.binary }

// Ready reports whether the agent binary can be run.
func (b *CLIBackend) Ready() error {
	if b.binary == "" {
		return errors.New("no agent binary: set agent.binary or put `agent` or `cursor-agent` on PATH")
	}
	if b.binary == BuiltinBench {
		return nil
	}
	p := b.binary
	if !strings.Contains(p, "/") {
		lp, err := exec.LookPath(p)
		if err != nil {
			return fmt.Errorf("agent binary %q: %w", p, err)
		}
		p = lp
	}
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("agent binary %s is not executable", p)
	}
	return nil
}

// agentEnv is the agent's environment: the allowed names of the gateway's
// environment that no deny pattern matches, the simulator's DOCSTREAM_SIM_*
// settings, plus CURSOR_API_KEY.
func agentEnv(environ []string, cfg AgentConfig) []string {
	var env []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "CURSOR_API_KEY" {
			continue
		}
		// The simulator's own settings are not secrets and always pass.
		if strings.HasPrefix(name, "DOCSTREAM_SIM_") || (matchAny(cfg.EnvAllow, name) && !matchAny(cfg.EnvDeny, name)) {
			env = append(env, kv)
		}
	}
	if cfg.APIKey != "" {
		env = append(env, "CURSOR_API_KEY="+cfg.APIKey)
	}
	sort.Strings(env)
	return env
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToUpper(p), strings.ToUpper(name)); ok {
			return true
		}
	}
	return false
}

// Args returns the command line for a run, after the binary.
func (b *CLIBackend) Args(spec *RunSpec) []string {
	args := append([]string(nil), b.prefix...)
	args = append(args, "--print", "--output-format", "stream-json", "--stream-partial-output")
	if spec.Model != "" && spec.Model != "auto" {
		args = append(args, "--model", spec.Model)
	}
	switch spec.Mode {
	case "plan", "ask", "debug":
		args = append(args, "--mode", spec.Mode)
	}
	if spec.SessionID != "" {
		args = append(args, "--resume", spec.SessionID)
	}
	if spec.Workspace != "" {
		args = append(args, "--workspace", spec.Workspace)
	}
	if b.cfg.Force {
		args = append(args, "--force")
	}
	if b.cfg.Trust {
		args = append(args, "--trust")
	}
	if b.cfg.ApproveMCPs {
		args = append(args, "--approve-mcps")
	}
	for _, h := range b.cfg.Headers {
		args = append(args, "-H", h)
	}
	return append(args, "--", spec.Prompt)
}

// SupportsDebug reports whether the installed CLI lists the debug mode in
// its --help (probed once).
func (b *CLIBackend) SupportsDebug(ctx context.Context) bool {
	b.probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, b.binary, append(append([]string(nil), b.prefix...), "--help")...)
		cmd.Env = b.env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second
		out, _ := cmd.Output()
		b.hasDebug = strings.Contains(string(out), "debug")
	})
	return b.hasDebug
}

// Run runs the agent for spec, feeding its output to seg, and returns how
// it ended. ctx ends the run: its cause (see stopCause) says why.
func (b *CLIBackend) Run(ctx context.Context, spec *RunSpec, seg *translate.Segmenter) translate.End {
	start := time.Now()
	elapsed := func() int64 { return time.Since(start).Milliseconds() }
	if err := b.Ready(); err != nil {
		b.metrics.SpawnFailures.Inc()
		return translate.End{Err: err, Elapsed: elapsed()}
	}
	if b.binary == BuiltinBench {
		return b.runBuiltin(ctx, spec, seg)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return translate.End{Err: fmt.Errorf("creating a pipe: %w", err), Elapsed: elapsed()}
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		stdoutR.Close()
		stdoutW.Close()
		return translate.End{Err: fmt.Errorf("creating a pipe: %w", err), Elapsed: elapsed()}
	}
	cmd := exec.Command(b.binary, b.Args(spec)...)
	cmd.Dir = spec.Workspace
	cmd.Env = b.env
	// The prompt goes after `--`; stdin is an empty pipe, closed at once, so
	// a read sees EOF (a /dev/null stdin has hung some CLI builds).
	cmd.Stdin = strings.NewReader("")
	cmd.Stdout = stdoutW
	cmd.Stderr = stderrW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stdoutR.Close()
		stderrR.Close()
		b.metrics.SpawnFailures.Inc()
		return translate.End{Err: err, Elapsed: elapsed()}
	}
	pgid := cmd.Process.Pid
	b.recordGroup(pgid)
	defer b.forgetGroup(pgid)
	out := &pipeReader{f: stdoutR}
	tail := newTail(b.cfg.StderrTailBytes)
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		buf := make([]byte, 4<<10) // stderr is small; a tail is kept
		for {
			n, err := stderrR.Read(buf)
			tail.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is read from cmd.ProcessState
		close(exited)
	}()

	// stop ends the process group: SIGTERM (or SIGKILL), then SIGKILL after
	// the grace, then the pipes are closed so no reader hangs.
	watchDone := make(chan struct{}) // closed when the output is read
	var stopOnce sync.Once
	stop := func(kill bool) {
		stopOnce.Do(func() {
			go func() {
				sig := syscall.SIGTERM
				if kill {
					sig = syscall.SIGKILL
				}
				_ = syscall.Kill(-pgid, sig)
				select {
				case <-exited:
				case <-time.After(b.cfg.KillGrace):
				}
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				select {
				case <-exited:
				case <-time.After(b.cfg.KillGrace):
				}
				// Whatever still holds the pipes (a child outside the group)
				// must not keep the run open; what the agent wrote before it
				// ended is still read first.
				out.waitBlocked(200*time.Millisecond, watchDone)
				stdoutR.Close()
				stderrR.Close()
			}()
		})
	}

	var reason documents.StopReason
	var reasonMsg string
	var reasonMu sync.Mutex
	setReason := func(r documents.StopReason, msg string) {
		reasonMu.Lock()
		if reason == "" {
			reason, reasonMsg = r, msg
		}
		reasonMu.Unlock()
	}
	// lastLine is when the last line was read, as time since start: the
	// idle timer re-arms from it when it fires, so that reading a line
	// does not have to wake this goroutine.
	var lastLine atomic.Int64
	lastLine.Store(int64(time.Since(start)))
	go func() {
		var total <-chan time.Time
		if b.cfg.RunTimeout > 0 {
			t := time.NewTimer(b.cfg.RunTimeout)
			defer t.Stop()
			total = t.C
		}
		idleD := b.cfg.IdleTimeout
		if idleD <= 0 {
			idleD = 24 * time.Hour
		}
		idle := time.NewTimer(idleD)
		defer idle.Stop()
		for {
			select {
			case <-watchDone:
				return
			case <-ctx.Done():
				r, msg, kill := stopCause(ctx)
				setReason(r, msg)
				stop(kill)
				return
			case <-total:
				setReason(documents.StopTimeout, fmt.Sprintf("the run exceeded its time limit of %s", b.cfg.RunTimeout))
				stop(false)
				return
			case <-idle.C:
				if silent := time.Since(start) - time.Duration(lastLine.Load()); silent < idleD {
					idle.Reset(idleD - silent)
					continue
				}
				setReason(documents.StopTimeout, fmt.Sprintf("the agent wrote nothing for %s", idleD))
				stop(false)
				return
			case <-exited:
				// The leader is gone; children that keep the pipes open get
				// a short linger, then the group is ended.
				select {
				case <-watchDone:
					return
				case <-time.After(b.cfg.LingerAfterResult):
					stop(false)
					return
				case <-ctx.Done():
					r, msg, kill := stopCause(ctx)
					setReason(r, msg)
					stop(kill)
					return
				}
			}
		}
	}()

	dec := translate.NewDecoder(out, b.cfg.MaxLineBytes)
	var readErr error
	for {
		ev, err := dec.Next()
		if err != nil {
			if !errors.Is(err, os.ErrClosed) && !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		lastLine.Store(int64(time.Since(start)))
		seg.Feed(ev)
		if seg.Done() {
			break
		}
	}
	close(watchDone)
	if seg.Done() {
		// The result ends the run even if the process lingers.
		select {
		case <-exited:
		case <-time.After(b.cfg.LingerAfterResult):
		}
		stop(false)
	} else {
		// The output ended: give the process a moment to exit by itself.
		select {
		case <-exited:
		case <-time.After(b.cfg.LingerAfterResult):
			stop(false)
		}
	}
	<-exited
	// WaitDelay only kills the leader; end the whole group in any case.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	stop(true)
	select {
	case <-stderrDone:
	case <-time.After(b.cfg.KillGrace + time.Second):
		stderrR.Close()
	}
	stdoutR.Close()

	end := translate.End{Stderr: tail.String(), Elapsed: elapsed()}
	reasonMu.Lock()
	end.Reason, end.Message = reason, reasonMsg
	reasonMu.Unlock()
	if st := cmd.ProcessState; st != nil {
		code, sig := exitStatus(st)
		b.metrics.AgentExits.WithLabelValues(strconv.Itoa(code), sig).Inc()
		end.Exited, end.ExitCode, end.Signal = code >= 0, code, sig
	}
	if readErr != nil && end.Reason == "" && !seg.Done() {
		end.Err = fmt.Errorf("reading the agent's output: %w", readErr)
	}
	return end
}

// exitStatus returns the exit code (-1 when killed) and the signal name.
func exitStatus(st *os.ProcessState) (int, string) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal().String()
	}
	return st.ExitCode(), ""
}

// pipeReader reads the agent's stdout and tracks whether a Read is waiting.
type pipeReader struct {
	f       *os.File
	waiting atomic.Bool
	reads   atomic.Int64
}

func (p *pipeReader) Read(b []byte) (int, error) {
	p.waiting.Store(true)
	n, err := p.f.Read(b)
	p.waiting.Store(false)
	p.reads.Add(1)
	return n, err
}

// waitBlocked returns once one Read has waited for at least d (the pipe is
// empty and still held open), or when done is closed.
func (p *pipeReader) waitBlocked(d time.Duration, done <-chan struct{}) {
	for {
		w, n := p.waiting.Load(), p.reads.Load()
		select {
		case <-done:
			return
		case <-time.After(d):
		}
		if w && p.waiting.Load() && p.reads.Load() == n {
			return
		}
	}
}

// tail keeps the last bytes written to it.
type tail struct {
	mu   sync.Mutex
	max  int
	buf  []byte
	lost bool
}

func newTail(max int) *tail {
	if max <= 0 {
		max = 16 << 10
	}
	return &tail{max: max}
}

func (t *tail) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
		t.lost = true
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	if len(b) > t.max {
		b, t.lost = b[len(b)-t.max:], true
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if t.lost {
		s = "…" + s
	}
	return s
}

// recordGroup notes a running agent process group in pidDir.
func (b *CLIBackend) recordGroup(pgid int) {
	if b.pidDir == "" {
		return
	}
	_ = os.WriteFile(filepath.Join(b.pidDir, strconv.Itoa(pgid)), []byte(b.binary), 0o600)
}

// forgetGroup removes a finished agent process group from pidDir.
func (b *CLIBackend) forgetGroup(pgid int) {
	if b.pidDir != "" {
		_ = os.Remove(filepath.Join(b.pidDir, strconv.Itoa(pgid)))
	}
}

// ReapOrphans ends the agent process groups a crashed gateway left behind:
// those recorded in pidDir whose leader still runs the agent binary. It
// returns how many it ended.
func ReapOrphans(pidDir string) int {
	ents, err := os.ReadDir(pidDir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		name := filepath.Join(pidDir, e.Name())
		pgid, err := strconv.Atoi(e.Name())
		bin, rerr := os.ReadFile(name)
		_ = os.Remove(name)
		if err != nil || rerr != nil || pgid <= 1 {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pgid))
		if err != nil || len(bin) == 0 || !strings.HasPrefix(string(cmdline), string(bin)) {
			continue
		}
		if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
