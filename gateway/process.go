package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"unicode"
	"unicode/utf16"

	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/sys/unix"

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

	// parker holds the output of quiet agents (nil: none, every run keeps
	// its goroutine).
	parker parker

	probeOnce sync.Once
	hasDebug  bool

	// secrets are masked in what clients see of the agent's output (its
	// stderr tail, its lines that are not JSON).
	secrets []string

	// leaders are the pids of the agents running now, until reaped.
	leadersMu sync.Mutex
	leaders   map[int]bool

	// Finished agents' marks wait here for the next sweep of /proc.
	sweepMu    sync.Mutex
	sweepIdle  *sync.Cond
	pending    map[string]int // mark → process group
	sweepSince int            // the lowest pid the pending marks need read
	sweeping   bool
}

// sweepGap is the least time between two sweeps of /proc: the runs that
// end meanwhile share the next one, so that many runs ending cost a few
// sweeps a second rather than one each.
const sweepGap = 200 * time.Millisecond

// sweepLater has the processes carrying a finished agent's mark killed by
// the next sweep (at once when none is running), then forgets its group.
// since is as for killMarked.
func (b *CLIBackend) sweepLater(mark string, pgid, since int) {
	b.sweepMu.Lock()
	if len(b.pending) == 0 {
		b.pending, b.sweepSince = map[string]int{}, since
	}
	b.pending[mark] = pgid
	b.sweepSince = min(b.sweepSince, since)
	start := !b.sweeping
	b.sweeping = true
	b.sweepMu.Unlock()
	if start {
		go b.sweep()
	}
}

// sweep kills what the pending marks left, until none is pending.
func (b *CLIBackend) sweep() {
	for {
		b.sweepMu.Lock()
		marks, since := b.pending, b.sweepSince
		b.pending = nil
		if len(marks) == 0 {
			b.sweeping = false
			if b.sweepIdle != nil {
				b.sweepIdle.Broadcast()
			}
			b.sweepMu.Unlock()
			return
		}
		b.sweepMu.Unlock()
		killMarked(marks, since, b.runningAgent)
		for _, pgid := range marks {
			b.forgetGroup(pgid)
		}
		time.Sleep(sweepGap)
	}
}

// waitSweeps returns once no sweep is pending or running.
func (b *CLIBackend) waitSweeps() {
	b.sweepMu.Lock()
	defer b.sweepMu.Unlock()
	if b.sweepIdle == nil {
		b.sweepIdle = sync.NewCond(&b.sweepMu)
	}
	for b.sweeping {
		b.sweepIdle.Wait()
	}
}

// setLeader notes that an agent with the given pid runs, or was reaped.
func (b *CLIBackend) setLeader(pid int, running bool) {
	b.leadersMu.Lock()
	defer b.leadersMu.Unlock()
	if b.leaders == nil {
		b.leaders = map[int]bool{}
	}
	if running {
		b.leaders[pid] = true
	} else {
		delete(b.leaders, pid)
	}
}

// runningAgent reports whether a pid is an agent this backend runs now:
// its environment holds its own run's mark, not a finished one's.
func (b *CLIBackend) runningAgent(pid int) bool {
	b.leadersMu.Lock()
	defer b.leadersMu.Unlock()
	return b.leaders[pid]
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
	b.secrets = agentSecrets(cfg)
	b.parker = defaultParker()
	return b
}

// Redact masks the agent's secrets in s (see agentSecrets).
func (b *CLIBackend) Redact(s string) string { return redact(s, b.secrets) }

// agentSecrets are the values the gateway hands the agent that its output
// must not pass on to clients: the API key and the header values, each
// also as its words (a token after "Bearer") and as JSON writes it: with
// escapes, with what is beyond ASCII escaped (in UTF-16), and HTML-safe.
// The longest come first, so that a secret that begins another does not
// leave the other's rest.
func agentSecrets(cfg AgentConfig) []string {
	seen := map[string]bool{}
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); len(v) >= 4 && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	addValue := func(v string) {
		forms := []string{v}
		words := strings.Fields(v)
		for i, w := range words {
			// The first of several words made of letters is a scheme
			// (Bearer, Basic), not a secret.
			scheme := i == 0 && len(words) > 1 && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) < 0
			if len(w) >= 6 && !scheme {
				forms = append(forms, w)
			}
		}
		for _, f := range forms {
			add(f)
			q, _ := jsontext.AppendQuote(nil, f)
			add(string(q[1 : len(q)-1]))
			add(jsonEscaped(f, false))
			add(jsonEscaped(f, true))
		}
	}
	addValue(cfg.APIKey)
	for _, h := range cfg.Headers {
		if _, v, ok := strings.Cut(h, ":"); ok {
			addValue(v)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// jsonEscaped writes s as a JSON string's inside that escapes everything
// beyond ASCII (as UTF-16 units, \ud83d\udd11 for one emoji), and also
// <, > and & when html is set.
func jsonEscaped(s string, html bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r > 0x7e || html && (r == '<' || r == '>' || r == '&'):
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
			} else {
				fmt.Fprintf(&b, "\\u%04x", r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// redact replaces every secret in s, and the end of one that s begins
// with: a tail of the agent's stderr may start within a secret (after the
// "…" that says so).
func redact(s string, secrets []string) string {
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	prefix := ""
	if rest, ok := strings.CutPrefix(s, "…"); ok {
		prefix, s = "…", rest
	}
	for _, v := range secrets {
		for k := len(v) - 1; k >= 4; k-- {
			if strings.HasPrefix(s, v[len(v)-k:]) {
				s = "[redacted]" + s[k:]
				break
			}
		}
	}
	return prefix + s
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
	if err := syscall.Access(p, 1); err != nil { // X_OK, for the gateway's own user
		return fmt.Errorf("agent binary %s cannot be run by this user: %w", p, err)
	}
	return interpreterReady(p)
}

// interpreterReady checks what the kernel needs to start the agent binary:
// a program (ELF), or a script whose #! line names an interpreter that can
// run, and through env a program on PATH.
func interpreterReady(script string) error {
	f, err := os.Open(script)
	if err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("\x7fELF")) {
		return nil
	}
	line, ok := bytes.CutPrefix(head, []byte("#!"))
	if !ok {
		return fmt.Errorf("agent binary %s is neither a program nor a script whose first line is #!", script)
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	if bytes.HasSuffix(line, []byte("\r")) {
		return fmt.Errorf("agent binary %s: its #! line ends in CR (a Windows line ending): the interpreter's name includes it", script)
	}
	interp, rest, _ := strings.Cut(strings.TrimLeft(string(line), " \t"), " ")
	rest = strings.TrimSpace(rest)
	if interp == "" {
		return fmt.Errorf("agent binary %s: its #! line names no interpreter", script)
	}
	if st, err := os.Stat(interp); err == nil && st.IsDir() {
		return fmt.Errorf("agent binary %s: its interpreter %s is a directory", script, interp)
	}
	if err := syscall.Access(interp, 1); err != nil {
		return fmt.Errorf("agent binary %s: its interpreter %s cannot be run: %w", script, interp, err)
	}
	if path.Base(interp) != "env" {
		return nil
	}
	// The kernel passes what follows the interpreter as one argument; env
	// splits it only after -S.
	args := []string{rest}
	if after, ok := strings.CutPrefix(rest, "-S"); ok {
		args = strings.Fields(after)
	}
	for _, a := range args {
		if a == "" || strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
			continue
		}
		if _, err := exec.LookPath(a); err != nil {
			return fmt.Errorf("agent binary %s: %q, which its #! line has env run, is not on PATH: %w", script, a, err)
		}
		return nil
	}
	return fmt.Errorf("agent binary %s: its #! line gives env no program to run", script)
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
	ch := make(chan translate.End, 1)
	b.Start(ctx, spec, seg, func(end translate.End) { ch <- end })
	return <-ch
}

// Start runs the agent for spec like Run, but returns as soon as the agent
// is quiet: its output is read on whichever goroutine has input for it, and
// done is called once, on one of them, with how the run ended.
func (b *CLIBackend) Start(ctx context.Context, spec *RunSpec, seg *translate.Segmenter, done func(translate.End)) {
	start := time.Now()
	if err := b.Ready(); err != nil {
		b.metrics.SpawnFailures.Inc()
		done(translate.End{Err: err, Elapsed: time.Since(start).Milliseconds()})
		return
	}
	if b.binary == BuiltinBench {
		b.startBuiltin(ctx, spec, seg, start, done)
		return
	}
	p, err := b.spawn(ctx, spec, seg, start, done)
	if err != nil {
		done(translate.End{Err: err, Elapsed: time.Since(start).Milliseconds()})
		return
	}
	p.pump.run()
}

// agentProc is one running agent process group. Its state lives on the
// heap, and its watchdogs are timers rather than goroutines, so that a run
// waiting on a quiet agent holds little more than its reading goroutine.
type agentProc struct {
	b      *CLIBackend
	ctx    context.Context
	start  time.Time
	cmd    *exec.Cmd
	pgid   int
	mark   string // the groupMarkName entry in its environment
	pump   *outputPump
	stderr *os.File
	errBuf []byte // stderr is read into it, on the heap so that its reader keeps the smallest stack
	tail   *tail
	done   func(translate.End)
	// killer ends the SIGTERM grace early (RunSpec.Kill); nil waits it out.
	killer Killer

	stderrDone chan struct{}
	exited     chan struct{}
	watchDone  chan struct{} // closed when the output is read
	stopOnce   sync.Once
	// signalled is set when the gateway signals the group; stopped, when
	// it had before the agent exited: the exit is then the gateway's doing.
	signalled atomic.Bool
	stopped   bool

	reasonMu  sync.Mutex
	reason    documents.StopReason
	reasonMsg string
	// The idle timer re-arms from the pump's lastLine when it fires, so
	// that reading a line does not touch a timer.
	idleD  time.Duration
	idle   *time.Timer
	total  *time.Timer
	unhook func() bool // stops the cancellation hook
}

// spawn starts the agent in its own process group with its stdout and
// stderr on pipes and its watchdogs armed; its pump is not yet running.
func (b *CLIBackend) spawn(ctx context.Context, spec *RunSpec, seg *translate.Segmenter, start time.Time, done func(translate.End)) (*agentProc, error) {
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating a pipe: %w", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		stdoutR.Close()
		stdoutW.Close()
		return nil, fmt.Errorf("creating a pipe: %w", err)
	}
	cmd := exec.Command(b.binary, b.Args(spec)...)
	cmd.Dir = spec.Workspace
	mark := groupMark()
	cmd.Env = append(b.env[:len(b.env):len(b.env)], mark)
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
		return nil, err
	}
	p := &agentProc{b: b, ctx: ctx, start: start, cmd: cmd, pgid: cmd.Process.Pid, mark: mark, killer: spec.Kill,
		stderr: stderrR, errBuf: make([]byte, 1<<10), tail: newTail(b.cfg.StderrTailBytes), done: done,
		stderrDone: make(chan struct{}), exited: make(chan struct{}), watchDone: make(chan struct{})}
	p.pump = newOutputPump(stdoutR, seg, b.cfg.MaxLineBytes, start, b.parker, spec.Hold, p.outputEnded)
	b.recordGroup(p.pgid, mark)
	b.setLeader(p.pgid, true)
	go p.drainStderr()
	go p.wait()
	p.watch()
	return p, nil
}

// outputDrainLimit is how long the output of a stopped agent is still read
// while something outside its process group keeps writing to it.
const outputDrainLimit = 2 * time.Second

// drainStderr reads the agent's stderr to its end, keeping the tail.
func (p *agentProc) drainStderr() {
	defer close(p.stderrDone)
	for {
		n, err := p.stderr.Read(p.errBuf)
		p.tail.Write(p.errBuf[:n])
		if err != nil {
			return
		}
	}
}

// wait reaps the agent. When the leader is gone while its output is still
// open (children keep the pipes), the group gets a short linger, then it
// is ended.
func (p *agentProc) wait() {
	_ = p.cmd.Wait() // the exit status is read from cmd.ProcessState
	// Its pid may be given again: it is no longer another run's agent.
	p.b.setLeader(p.pgid, false)
	p.stopped = p.signalled.Load()
	close(p.exited)
	select {
	case <-p.watchDone:
		return
	default:
	}
	time.AfterFunc(p.b.cfg.LingerAfterResult, func() {
		select {
		case <-p.watchDone:
		default:
			p.stop(false)
		}
	})
}

// watch arms the watchdogs: the run's context, its total time and the
// agent's silence. They are disarmed once the output is read.
func (p *agentProc) watch() {
	p.unhook = context.AfterFunc(p.ctx, func() {
		r, msg, kill := stopCause(p.ctx)
		p.setReason(r, msg)
		p.stop(kill)
	})
	if d := p.b.cfg.RunTimeout; d > 0 {
		p.total = time.AfterFunc(d, func() {
			p.setReason(documents.StopTimeout, fmt.Sprintf("the run exceeded its time limit of %s", d))
			p.stop(false)
		})
	}
	p.idleD = p.b.cfg.IdleTimeout
	if p.idleD <= 0 {
		p.idleD = 24 * time.Hour
	}
	p.idle = time.AfterFunc(p.idleD, p.idleFired)
}

// idleFired ends a run whose agent wrote nothing for the idle timeout, or
// re-arms the timer from the last line.
func (p *agentProc) idleFired() {
	select {
	case <-p.watchDone:
		return
	default:
	}
	if silent := time.Since(p.start) - time.Duration(p.pump.lastLine.Load()); silent < p.idleD {
		p.idle.Reset(p.idleD - silent)
		return
	}
	p.setReason(documents.StopTimeout, fmt.Sprintf("the agent wrote nothing for %s", p.idleD))
	p.stop(false)
}

// disarm stops the watchdogs once the output is read.
func (p *agentProc) disarm() {
	close(p.watchDone)
	p.unhook()
	p.idle.Stop()
	if p.total != nil {
		p.total.Stop()
	}
}

func (p *agentProc) setReason(r documents.StopReason, msg string) {
	p.reasonMu.Lock()
	if p.reason == "" {
		p.reason, p.reasonMsg = r, msg
	}
	p.reasonMu.Unlock()
}

// stop ends the process group: SIGTERM (or SIGKILL), then SIGKILL after
// the grace, then the pipes are closed so no reader hangs.
func (p *agentProc) stop(kill bool) {
	p.stopOnce.Do(func() { go p.kill(kill) })
}

func (p *agentProc) kill(kill bool) {
	grace := p.b.cfg.KillGrace
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	p.signalled.Store(true)
	_ = syscall.Kill(-p.pgid, sig)
	var killNow <-chan struct{}
	if p.killer != nil {
		killNow = p.killer.KillNow()
	}
	select {
	case <-p.exited:
	case <-time.After(grace):
	case <-killNow:
	}
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(grace):
	}
	// Whatever still holds the pipes (a child outside the group) must not
	// keep the run open; what the agent wrote before it ended is still read
	// first, for at most outputDrainLimit: a process that escaped the group
	// can write for ever.
	p.pump.out.waitBlocked(200*time.Millisecond, outputDrainLimit, p.watchDone)
	p.pump.close()
	p.stderr.Close()
}

// outputEnded follows the end of the agent's output (or its result): it
// ends the process group and says how the run ended.
func (p *agentProc) outputEnded(readErr error) {
	defer func() {
		// What the agent started in a session of its own (setsid) is not
		// in its group; it ends with the run all the same, in the next
		// sweep of /proc (at once, or within sweepGap when runs end
		// together). A short run passes over the processes older than its
		// agent; in a long one pids may wrap around and climb past the
		// agent's again.
		since := p.pgid
		if time.Since(p.start) > time.Minute {
			since = 0
		}
		p.b.sweepLater(p.mark, p.pgid, since)
	}()
	seg := p.pump.seg
	p.disarm()
	linger := time.NewTimer(p.b.cfg.LingerAfterResult)
	defer linger.Stop()
	if seg.Done() {
		// The result ends the run even if the process lingers.
		select {
		case <-p.exited:
		case <-linger.C:
		}
		p.stop(false)
	} else {
		// The output ended: give the process a moment to exit by itself.
		select {
		case <-p.exited:
		case <-linger.C:
			p.stop(false)
		}
	}
	<-p.exited
	// WaitDelay only kills the leader; end the whole group in any case.
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	p.stop(true)
	select {
	case <-p.stderrDone:
	case <-time.After(p.b.cfg.KillGrace + time.Second):
		p.stderr.Close()
	}
	p.pump.close()

	// The segmenter masks the agent's secrets in it (Options.Redact), with
	// the lines the agent wrote that were not JSON.
	end := translate.End{Stderr: p.tail.String(), Elapsed: time.Since(p.start).Milliseconds()}
	p.reasonMu.Lock()
	end.Reason, end.Message = p.reason, p.reasonMsg
	p.reasonMu.Unlock()
	if st := p.cmd.ProcessState; st != nil {
		code, sig := exitStatus(st)
		by := ""
		if p.stopped {
			by = "gateway"
		}
		p.b.metrics.AgentExits.WithLabelValues(strconv.Itoa(code), sig, by).Inc()
		end.Exited, end.ExitCode, end.Signal = code >= 0, code, sig
	}
	if readErr != nil && end.Reason == "" && !seg.Done() {
		end.Err = fmt.Errorf("reading the agent's output: %w", readErr)
	}
	p.done(end)
}

// lastPid returns the pid the kernel gave last (0 when unknown).
func lastPid() int {
	var buf [128]byte
	bp := buf[:0]
	b, err := readProcFile(&bp, "/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 5 {
		return 0
	}
	n, _ := strconv.Atoi(f[4])
	return n
}

// exitStatus returns the exit code (-1 when killed) and the signal name.
func exitStatus(st *os.ProcessState) (int, string) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		if name := unix.SignalName(ws.Signal()); name != "" {
			return -1, name // SIGKILL, where String() says "killed"
		}
		return -1, strconv.Itoa(int(ws.Signal())) // a real-time signal: its number
	}
	return st.ExitCode(), ""
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

// groupMarkName is the environment variable that marks an agent's
// processes, and the tools they start, as those of one run: a restarted
// gateway finds what a crash left running by it, wherever the processes
// went (another process group, a new session) and whether or not the
// agent's leader still runs.
const groupMarkName = "AGENT_GATEWAY_GROUP"

// groupMark returns a new mark: the environment entry of groupMarkName.
func groupMark() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return groupMarkName + "=" + hex.EncodeToString(b)
}

// recordGroup notes a running agent process group and its mark in pidDir.
func (b *CLIBackend) recordGroup(pgid int, mark string) {
	if b.pidDir == "" {
		return
	}
	_ = os.WriteFile(filepath.Join(b.pidDir, strconv.Itoa(pgid)), []byte(b.binary+"\n"+mark), 0o600)
}

// forgetGroup removes a finished agent process group from pidDir.
func (b *CLIBackend) forgetGroup(pgid int) {
	if b.pidDir != "" {
		_ = os.Remove(filepath.Join(b.pidDir, strconv.Itoa(pgid)))
	}
}

// ReapOrphans ends what the agents of a crashed gateway left running: every
// process that carries the mark of a run recorded in pidDir, and the
// recorded process groups whose leader still runs the agent binary. It
// returns how many runs had something left.
func ReapOrphans(pidDir string) int {
	ents, err := os.ReadDir(pidDir)
	if err != nil {
		return 0
	}
	marks := map[string]int{} // mark → pgid
	reaped := map[int]bool{}
	for _, e := range ents {
		name := filepath.Join(pidDir, e.Name())
		pgid, err := strconv.Atoi(e.Name())
		rec, rerr := os.ReadFile(name)
		_ = os.Remove(name)
		if err != nil || rerr != nil || pgid <= 1 {
			continue
		}
		bin, mark, _ := strings.Cut(string(rec), "\n")
		if strings.HasPrefix(mark, groupMarkName+"=") {
			marks[mark] = pgid
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pgid))
		if err == nil && bin != "" && strings.HasPrefix(string(cmdline), bin) && syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			reaped[pgid] = true
		}
	}
	for pgid := range killMarked(marks, 0, nil) {
		reaped[pgid] = true
	}
	return len(reaped)
}

// killMarked kills every process whose environment holds one of marks and
// returns the process groups (the marks' values) that had one. Processes
// with a pid below since are passed over while pids have not wrapped
// around since it was given: they were started before it. So are the pids
// skip reports (nil: none), such as other runs' agents, whose environments
// hold their own marks.
func killMarked(marks map[string]int, since int, skip func(pid int) bool) map[int]bool {
	killed := map[int]bool{}
	if len(marks) == 0 {
		return killed
	}
	if since > 0 && lastPid() < since {
		since = 0 // pids wrapped around
	}
	dir, err := os.Open("/proc")
	if err != nil {
		return killed
	}
	names, _ := dir.Readdirnames(-1)
	dir.Close()
	bp := procBufs.Get().(*[]byte)
	defer procBufs.Put(bp)
	self := os.Getpid()
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue // not a process
		}
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 || pid < since || pid == self || (skip != nil && skip(pid)) {
			continue
		}
		env, err := readProcFile(bp, "/proc/"+name+"/environ")
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if pgid, ok := marks[string(kv)]; ok {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed[pgid] = true
				}
				break
			}
		}
	}
	return killed
}

// procBufs hold the files of /proc that killMarked reads, one at a time.
var procBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// readProcFile reads a whole file into *bp, growing it as needed, and
// returns its bytes, valid until the next call with bp. A file of /proc
// has no size to read in advance, and os.ReadFile would allocate for each.
func readProcFile(bp *[]byte, path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	b := (*bp)[:0]
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := unix.Read(fd, b[len(b):cap(b)])
		if n > 0 {
			b = b[:len(b)+n]
		}
		switch {
		case err == unix.EINTR:
		case err != nil:
			*bp = b
			return nil, err
		case n == 0:
			*bp = b
			return b, nil
		}
	}
}
