// Package agent runs cursor-agent (or the simulator) as a subprocess in its
// own process group and feeds its stream-json output to a segmenter.
package agent

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/translate"
	"github.com/rs/zerolog"
)

// Config configures how cursor-agent is run (the `agent` section).
type Config struct {
	Binary            string            `yaml:"binary"`
	ArgsPrefix        []string          `yaml:"args_prefix"`
	APIKey            string            `yaml:"api_key"`
	Headers           []string          `yaml:"headers"`
	Force             bool              `yaml:"force"`
	Trust             bool              `yaml:"trust"`
	ApproveMCPs       bool              `yaml:"approve_mcps"`
	Workspaces        map[string]string `yaml:"workspaces"`
	DefaultWorkspace  string            `yaml:"default_workspace"`
	IdleTimeout       time.Duration     `yaml:"idle_timeout"`
	RunTimeout        time.Duration     `yaml:"run_timeout"`
	LingerAfterResult time.Duration     `yaml:"linger_after_result"`
	KillGrace         time.Duration     `yaml:"kill_grace"`
	MaxLineBytes      int               `yaml:"max_line_bytes"` // DefaultMaxLineBytes by default
	StderrTailBytes   int               `yaml:"stderr_tail_bytes"`
	EnvAllow          []string          `yaml:"env_allow"`
	EnvDeny           []string          `yaml:"env_deny"`
	Protocol          string            `yaml:"protocol"`    // print (stream-json) or acp (`agent acp`, which can wait for answers)
	Permissions       string            `yaml:"permissions"` // ask (only an interactive client), allow or deny: what the allow lists do not allow
	AllowCommands     []string          `yaml:"allow_commands"`
	AllowMCPTools     []string          `yaml:"allow_mcp_tools"`
	AnswerTimeout     time.Duration     `yaml:"answer_timeout"`
}

// DefaultMaxLineBytes is agent.max_line_bytes by default (see docs/operations.md).
const DefaultMaxLineBytes = 8 << 20

// Backend runs the agent binary for runs; it is a runs.Backend.
type Backend struct {
	cfg     Config
	binary  string
	env     []string
	metrics *metrics.Metrics
	PidDir  string         // when set, a file per running agent group, for ReapOrphans
	Home    string         // when set, the home mark of every agent (see HomeMark)
	Log     zerolog.Logger // what goes wrong off the runs' paths

	probeOnce sync.Once
	hasDebug  bool

	leaders sync.Map // pid → true: the agents running now, until reaped

	sweepMu    sync.Mutex
	pending    map[string]int // finished agents' marks → process group, for the next sweep
	sweepSince int            // the lowest pid the pending marks need read
	swept      chan struct{}  // closed when the running sweep ends; nil when none runs

	acpRuns sync.Map // response id → *acpSession, for Respond
}

var _ runs.Backend = (*Backend)(nil)

// New resolves the agent binary and the agent's environment. The binary is
// cfg.Binary, else `agent`, else `cursor-agent` on PATH.
func New(cfg Config, environ []string, m *metrics.Metrics) *Backend {
	b := &Backend{cfg: cfg, metrics: m, binary: cfg.Binary}
	for _, name := range []string{"agent", "cursor-agent"} {
		if p, err := exec.LookPath(name); err == nil && b.binary == "" {
			b.binary = p
		}
	}
	b.env = agentEnv(environ, cfg)
	b.cfg.Permissions = cmp.Or(cfg.Permissions, PermissionsAsk)
	b.cfg.AnswerTimeout = cmp.Or(cfg.AnswerTimeout, 10*time.Minute)
	return b
}

// Binary returns the agent binary, "" when none was found.
func (b *Backend) Binary() string { return b.binary }

// Output runs the agent binary with args (after agent.args_prefix) outside
// any run and returns its standard output; ctx bounds it.
func (b *Backend) Output(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.binary, slices.Concat(b.cfg.ArgsPrefix, args)...)
	cmd.Env = b.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) } // the whole group
	cmd.WaitDelay = time.Second
	return cmd.Output()
}

// SupportsDebug reports whether the installed CLI's --help lists the debug mode.
func (b *Backend) SupportsDebug(ctx context.Context) bool {
	b.probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, _ := b.Output(ctx, "--help")
		b.hasDebug = strings.Contains(string(out), "debug")
	})
	return b.hasDebug
}

// Args returns the command line for a run, after the binary: `--print`
// with the prompt after `--`, or `acp` (agent.protocol: acp).
func (b *Backend) Args(spec *runs.Spec) []string {
	args, printMode := slices.Clone(b.cfg.ArgsPrefix), b.cfg.Protocol != "acp"
	add := func(when bool, flags ...string) {
		if when {
			args = append(args, flags...)
		}
	}
	add(printMode, "--print", "--output-format", "stream-json", "--stream-partial-output")
	add(spec.Model != "" && spec.Model != "auto", "--model", spec.Model)
	add(printMode && (spec.Mode == "plan" || spec.Mode == "ask" || spec.Mode == "debug"), "--mode", spec.Mode)
	add(printMode && spec.SessionID != "", "--resume", spec.SessionID)
	add(printMode && spec.Workspace != "", "--workspace", spec.Workspace)
	add(b.cfg.Force, "--force")
	add(b.cfg.Trust, "--trust")
	add(b.cfg.ApproveMCPs, "--approve-mcps")
	for _, h := range b.cfg.Headers {
		add(true, "-H", h)
	}
	if !printMode {
		return append(args, "acp")
	}
	return append(args, "--", spec.Prompt)
}

// outputDrainLimit is how long a stopped agent's output held open is still read.
const outputDrainLimit = 2 * time.Second

// lingerStop ends a run's context when the agent lingers after its output
// ended; the run then has no stop reason.
var lingerStop = errors.New("the agent lingered after its output ended")

// proc is one running agent process group.
type proc struct {
	b        *Backend
	ctx      context.Context
	stop     context.CancelCauseFunc
	start    time.Time
	cmd      *exec.Cmd
	pgid     int
	mark     string         // the groupMarkName entry in its environment
	stdin    io.WriteCloser // an ACP agent's; a print agent's is closed at once
	stdout   *output
	stderr   *os.File
	tail     *tail
	killNow  <-chan struct{}
	lastLine atomic.Int64 // when the last line was read, as time since start
	waiting  atomic.Bool  // an ACP agent waits for a client's answer: silent, not idle

	exited    chan struct{} // closed once the leader is reaped
	readDone  chan struct{} // closed once the output is read
	errDone   chan struct{} // closed once stderr is read
	signalled atomic.Bool   // the gateway signalled the group
}

// Run runs the agent for spec, feeding its output to seg, and says how it ended.
func (b *Backend) Run(ctx context.Context, spec *runs.Spec, seg *translate.Segmenter) translate.End {
	start := time.Now()
	p, err := b.spawn(ctx, spec, start)
	if err != nil {
		b.metrics.SpawnFailures.Inc()
		return translate.End{Err: err, Elapsed: time.Since(start).Milliseconds()}
	}
	if b.cfg.Protocol == "acp" {
		return p.runACP(ctx, spec, seg)
	}
	readErr := p.read(seg)
	close(p.readDone)
	end := p.end()
	if readErr != nil && end.Reason == "" && !seg.Done() {
		end.Err = fmt.Errorf("reading the agent's output: %w", readErr)
	}
	return end
}

// spawn starts the agent for spec in its own process group, with its
// watchdogs armed; an ACP agent outlives ctx until session/cancel's grace.
func (b *Backend) spawn(ctx context.Context, spec *runs.Spec, start time.Time) (*proc, error) {
	if err := b.Ready(); err != nil {
		return nil, err
	}
	if b.cfg.Protocol == "acp" {
		ctx = context.WithoutCancel(ctx)
	}
	ctx, stop := context.WithCancelCause(ctx)
	cmd := exec.CommandContext(ctx, b.binary, b.Args(spec)...)
	p := &proc{b: b, ctx: ctx, stop: stop, start: start, cmd: cmd, mark: groupMarkName + "=" + rand.Text(),
		tail: newTail(b.cfg.StderrTailBytes), exited: make(chan struct{}), readDone: make(chan struct{}), errDone: make(chan struct{}),
		killNow: spec.Killed}
	cmd.Dir = spec.Workspace
	cmd.Env = append(b.env[:len(b.env):len(b.env)], p.mark)
	if b.Home != "" {
		cmd.Env = append(cmd.Env, homeMarkName+"="+b.Home)
	}
	// The prompt goes after `--`; a print agent's stdin is an empty pipe,
	// closed at once, so a read sees EOF (a /dev/null stdin has hung some
	// CLI builds).
	stdin, err := cmd.StdinPipe()
	stdoutR, stdoutW, err2 := os.Pipe()
	stderrR, stderrW, err3 := os.Pipe()
	if err = errors.Join(err, err2, err3); err != nil {
		err = fmt.Errorf("creating a pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = p.cancel
	// A leader that outlives both signals is killed by Wait itself.
	cmd.WaitDelay = 2*b.cfg.KillGrace + time.Second
	if err == nil {
		err = cmd.Start()
	}
	stdoutW.Close()
	stderrW.Close()
	if err != nil {
		stop(nil)
		stdoutR.Close()
		stderrR.Close()
		return nil, err
	}
	p.stdin, p.stdout, p.stderr, p.pgid = stdin, &output{File: stdoutR}, stderrR, cmd.Process.Pid
	if b.cfg.Protocol != "acp" {
		stdin.Close()
	}
	b.recordGroup(p.pgid, p.mark)
	b.leaders.Store(p.pgid, true)
	go p.wait()
	go func() {
		_, _ = io.Copy(p.tail, p.stderr)
		close(p.errDone)
	}()
	p.watch()
	return p, nil
}

// read feeds the agent's lines to seg until its output ends or its result.
func (p *proc) read(seg *translate.Segmenter) error {
	dec := translate.NewDecoder(p.stdout, p.b.cfg.MaxLineBytes)
	for !seg.Done() {
		ev, err := dec.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			return err
		}
		p.lastLine.Store(int64(time.Since(p.start)))
		seg.Feed(ev)
	}
	return nil
}

// wait reaps the agent, then kills its group and drains an output still
// held open after the linger, or at once if the agent was stopped.
func (p *proc) wait() {
	_ = p.cmd.Wait() // the exit status is read from cmd.ProcessState
	// Its pid may be given again: it is no longer another run's agent.
	p.b.leaders.Delete(p.pgid)
	close(p.exited)
	select {
	case <-p.readDone:
		return
	case <-p.ctx.Done():
	case <-time.After(p.b.cfg.LingerAfterResult):
	}
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	p.drainOutput()
}

// drainOutput closes the agent's output once read; or, from outputDrainLimit
// on, once the reader has waited that long in reads (what is left comes from
// a process outside the group) or has read more than a pipe holds. A reader
// still busy with what the agent wrote before it stopped is not cut short.
func (p *proc) drainOutput() {
	const tick = outputDrainLimit / 20
	start, read0, waited := time.Now(), p.stdout.read.Load(), time.Duration(0)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.readDone:
			return
		case now := <-t.C:
			if p.stdout.reading.Load() {
				waited += tick
			}
			if now.Sub(start) >= outputDrainLimit && (waited >= outputDrainLimit || p.stdout.read.Load()-read0 > maxPipe) {
				_ = p.stdout.Close()
				return
			}
		}
	}
}

// maxPipe bounds what a pipe holds: more read after the agent stopped was
// written after it stopped, by a process outside its group.
const maxPipe = 1 << 20

// output is the agent's stdout as the run reads it, with how much its reads
// returned and whether one is under way.
type output struct {
	*os.File
	read    atomic.Int64 // bytes returned
	reading atomic.Bool
}

func (o *output) Read(b []byte) (int, error) {
	o.reading.Store(true)
	n, err := o.File.Read(b)
	o.reading.Store(false)
	o.read.Add(int64(n))
	return n, err
}

// watch arms the watchdogs of the run's total time and the agent's silence.
func (p *proc) watch() {
	if d := p.b.cfg.RunTimeout; d > 0 {
		t := time.AfterFunc(d, func() {
			p.stop(&runs.Stop{Reason: documents.StopTimeout, Msg: fmt.Sprintf("the run exceeded its time limit of %s", d)})
		})
		context.AfterFunc(p.ctx, func() { t.Stop() })
	}
	idle := p.b.cfg.IdleTimeout
	if idle <= 0 {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(idle, func() {
		if p.waiting.Load() {
			t.Reset(idle)
			return
		}
		// Re-armed from the last line, so that reading one need not touch it.
		if silent := time.Since(p.start) - time.Duration(p.lastLine.Load()); silent < idle {
			t.Reset(idle - silent)
			return
		}
		p.stop(&runs.Stop{Reason: documents.StopTimeout, Msg: fmt.Sprintf("the agent wrote nothing for %s", idle)})
	})
	context.AfterFunc(p.ctx, func() { t.Stop() })
}

// cancel is the command's Cancel: it signals the process group, then kills
// it once the leader exited, after the grace, or once spec.Killed is closed.
func (p *proc) cancel() error {
	sig := syscall.SIGTERM
	if _, _, kill := runs.StopCause(p.ctx); kill {
		sig = syscall.SIGKILL
	}
	p.signalled.Store(true)
	// Start may call this before spawn sets p.pgid: a group of 0 is the gateway's own.
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	go func() {
		select {
		case <-p.exited:
		case <-time.After(p.b.cfg.KillGrace):
		case <-p.killNow:
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}()
	return nil
}

// end ends the process group once the output ended and says how the run did.
func (p *proc) end() translate.End {
	select {
	case <-p.exited:
	case <-time.After(p.b.cfg.LingerAfterResult):
		p.stop(lingerStop)
	}
	<-p.exited
	// What the leader left in its group ends with it.
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	p.stop(nil)
	_ = p.stdout.Close()
	select {
	case <-p.errDone:
	case <-time.After(p.b.cfg.KillGrace + time.Second):
	}
	_ = p.stderr.Close()
	// What the agent started in a session of its own ends in the next
	// sweep; a long run's pids may have wrapped around.
	since := p.pgid
	if time.Since(p.start) > time.Minute {
		since = 0
	}
	p.b.sweepLater(p.mark, p.pgid, since)

	// The run masks the secrets in the tail (see runs.Redactor).
	end := translate.End{Stderr: p.tail.String(), Elapsed: time.Since(p.start).Milliseconds()}
	stopped := p.signalled.Load() // final: Cancel is not called once the leader is reaped
	if stopped && context.Cause(p.ctx) != lingerStop {
		end.Reason, end.Message, _ = runs.StopCause(p.ctx)
	}
	if st := p.cmd.ProcessState; st != nil {
		code, sig := st.ExitCode(), "" // -1 when killed
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			// SIGKILL, where String() says "killed"; a real-time signal's number
			sig = cmp.Or(unix.SignalName(ws.Signal()), strconv.Itoa(int(ws.Signal())))
		}
		by := ""
		if stopped {
			by = "gateway"
		}
		p.b.metrics.AgentExits.WithLabelValues(strconv.Itoa(code), sig, by).Inc()
		end.Exited, end.ExitCode, end.Signal = code >= 0, code, sig
	}
	return end
}

// tail keeps the last bytes written to it.
type tail struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	written int
}

func newTail(max int) *tail {
	if max <= 0 {
		max = 16 << 10
	}
	return &tail{max: max}
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf, t.written = append(t.buf, p...), t.written+len(p)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf[max(0, len(t.buf)-t.max):]
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if t.written > len(b) {
		s = "…" + s
	}
	return s
}

// Secrets returns the values the gateway hands the agent that its output
// must not pass on: the API key and the header values.
func (c Config) Secrets() []string {
	out := []string{c.APIKey}
	for _, h := range c.Headers {
		if _, v, ok := strings.Cut(h, ":"); ok {
			out = append(out, v)
		}
	}
	return out
}
