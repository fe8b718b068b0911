// Command docstream-bench measures what Docstream adds over a bare relay:
// parse and segment throughput on the real corpus and a large generated
// transcript, and, end to end, per-event latency, time to headers and to the
// first document, events/s, CPU and memory of the real server (with the
// agent simulator as a child process) and of the gateway with an in-process
// backend of its own (no children), beside a bare relay that copies the
// same agent's lines into SSE data events, in the same run.
//
// It prints the bounds Docstream holds beside the measured figures, then
// the detailed table, and writes both to bench-results/latest.md. -smoke is
// a short run for CI that fails only when a ratio regresses grossly.
// Everything listens on 127.0.0.1 and stops by itself.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

type options struct {
	smoke      bool
	corpusDir  string
	out        string
	docs       string
	genMiB     int
	gatewayBin string
	only       string
	against    string
	rounds     int
	benchtime  time.Duration
	latencies  string
}

func run(args []string) int {
	fs := flag.NewFlagSet("docstream-bench", flag.ContinueOnError)
	var o options
	fs.BoolVar(&o.smoke, "smoke", false, "a short run for CI: fails only on a gross regression of a ratio")
	fs.StringVar(&o.corpusDir, "corpus", "../shared/fixtures/real", "directory of real agent transcripts (*.ndjson)")
	fs.StringVar(&o.out, "out", "", "write the table here (default bench-results/latest.md, or bench-results/smoke.md with -smoke)")
	fs.StringVar(&o.docs, "docs", "README.md,docs/performance.md", "after a complete full run, also write the bounds table between the docstream-bench markers of these markdown files (comma-separated; \"\" for none)")
	fs.IntVar(&o.genMiB, "gen-mib", 64, "size of the generated transcript in MiB")
	fs.StringVar(&o.gatewayBin, "gateway-bin", "", "use this docstream binary instead of building ./cmd/docstream")
	fs.StringVar(&o.against, "against", "", "compare with this docstream binary instead of the bare relay (before/after a change)")
	fs.IntVar(&o.rounds, "rounds", 0, "rounds per end-to-end case (default: each case's own)")
	fs.StringVar(&o.only, "only", "", "run only these parts, comma-separated: parse, e2e, longline, or scenario keys")
	fs.DurationVar(&o.benchtime, "benchtime", time.Second, "time per parsing benchmark")
	fs.StringVar(&o.latencies, "latencies", "", "also write every delta's latency to this file, one line each (case, server, round, stream, place in the stream, emit instant, latency), to see where in the streams a tail falls")
	relayServe := fs.Bool("relay-serve", false, "internal: serve the bare relay")
	relayAgent := fs.String("relay-agent", "", "internal: the relay's agent binary")
	relayPrefix := fs.String("relay-prefix", "", "internal: the relay's agent argument prefix, comma-separated")
	relayWS := fs.String("relay-workspace", "", "internal: the relay's agent working directory")
	gatewayServe := fs.Bool("gateway-serve", false, "internal: serve the gateway with the in-process backend")
	var gsc gatewayServeConfig
	fs.StringVar(&gsc.Workspace, "gateway-workspace", "", "internal: the in-process gateway's workspace")
	fs.IntVar(&gsc.Streams, "gateway-streams", 0, "internal: the streams the in-process gateway makes room for")
	fs.Float64Var(&gsc.Spawn, "gateway-spawn", -1, "internal: the in-process gateway's spawn limit per second (< 0: the default)")
	fs.StringVar(&gsc.Store, "gateway-store", "", "internal: the in-process gateway's SQLite store (default: in memory)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *gatewayServe {
		if err := serveGateway(gsc); err != nil {
			fmt.Fprintln(os.Stderr, "gateway:", err)
			return 1
		}
		return 0
	}
	if *relayServe {
		if err := serveRelay(relayConfig{Agent: *relayAgent, Prefix: splitList(*relayPrefix), Workspace: *relayWS}); err != nil {
			fmt.Fprintln(os.Stderr, "relay:", err)
			return 1
		}
		return 0
	}
	if o.out == "" {
		o.out = "bench-results/latest.md"
		if o.smoke {
			o.out = "bench-results/smoke.md"
		}
	}
	if o.smoke {
		o.genMiB = min(o.genMiB, 4)
		o.benchtime = min(o.benchtime, 200*time.Millisecond)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docstream-bench:", err)
		return 1
	}
	text := rep.markdown()
	fmt.Print(text)
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err == nil {
		if err := os.WriteFile(o.out, []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "docstream-bench:", err)
		} else {
			fmt.Fprintln(os.Stderr, "wrote", o.out)
		}
	}
	// Only a complete full run replaces the committed results.
	full := !o.smoke && o.only == "" && o.against == "" && o.rounds == 0 && o.gatewayBin == ""
	for _, doc := range strings.Split(o.docs, ",") {
		if _, err := os.Stat(doc); doc == "" || !full || err != nil {
			continue
		}
		if err := updateDocs(doc, rep.docsBlock()); err != nil {
			fmt.Fprintln(os.Stderr, "docstream-bench:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "updated", doc)
	}
	if o.smoke {
		if fails := rep.smokeFailures(); len(fails) > 0 {
			for _, f := range fails {
				fmt.Fprintln(os.Stderr, "SMOKE FAIL:", f)
			}
			return 1
		}
		fmt.Fprintln(os.Stderr, "smoke: ok")
	}
	return 0
}

// wanted reports whether a part or scenario key is selected by -only.
func (o options) wanted(part, key string) bool {
	if o.only == "" {
		return true
	}
	for _, w := range strings.Split(o.only, ",") {
		w = strings.TrimSpace(w)
		if w == part || (key != "" && w == key) {
			return true
		}
	}
	return false
}

// report holds everything measured.
type report struct {
	Baseline string // what the baseline column is, when not the bare relay
	Machine  string
	LoadAt   [2]string // load averages at the start and the end
	Started  time.Time
	Smoke    bool
	Notes    []string
	Parse    []parseSet
	E2E      []e2eOutcome
	Duration time.Duration
	// LongLinePeak is the gateway's peak RSS in the long-line row, or
	// LongLineErr why it was not measured.
	LongLinePeak int64
	LongLineErr  error
}

type parseSet struct {
	Corpus  *corpus
	Results []parseResult
}

func bench(ctx context.Context, o options) (*report, error) {
	rep := &report{Machine: machine(), Started: time.Now(), Smoke: o.smoke}
	rep.LoadAt[0] = loadAverage()
	defer func() { rep.LoadAt[1] = loadAverage() }()
	nofile := raiseNoFile()
	logf := func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	logf("machine: %s; open files limit %d", rep.Machine, nofile)

	if o.wanted("parse", "") {
		var sets []*corpus
		c, err := loadCorpus(o.corpusDir)
		switch {
		case err != nil:
			return nil, err
		case c == nil:
			rep.Notes = append(rep.Notes, fmt.Sprintf("The real corpus was skipped: no *.ndjson in %s (set -corpus).", o.corpusDir))
		default:
			sets = append(sets, c)
		}
		g := genTranscript(o.genMiB<<20, 1)
		sets = append(sets, newCorpus(fmt.Sprintf("generated transcript (%d MiB)", o.genMiB), [][]byte{g}))
		for _, c := range sets {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			logf("parse: %s, %d lines, %d bytes", c.Name, c.Lines, c.Bytes)
			res, err := runParse(c, o.benchtime)
			if err != nil {
				return nil, err
			}
			for _, r := range res {
				logf("  %-55s %9.1f MiB/s per CPU-s (%9.1f wall) %8.3f µs/line %6.2f allocs/line", r.Stage, r.MiBps, r.WallMiBps, r.NsPerLine/1000, r.AllocsPerLn)
			}
			rep.Parse = append(rep.Parse, parseSet{Corpus: c, Results: res})
		}
	}

	cases := fullCases
	if o.smoke {
		cases = smokeCases
	}
	var selected []e2eCase
	for _, c := range cases {
		if o.wanted("e2e", c.Key) {
			if o.rounds > 0 {
				c.Rounds = o.rounds
			}
			selected = append(selected, c)
		}
	}
	longLine := o.wanted("longline", "") && !o.smoke && o.against == ""
	if len(selected) > 0 || longLine {
		dir, err := os.MkdirTemp("", "docstream-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		ws := filepath.Join(dir, "workspace")
		if err := os.MkdirAll(ws, 0o755); err != nil {
			return nil, err
		}
		bin := o.gatewayBin
		if bin == "" {
			logf("building ./cmd/docstream")
			if bin, err = buildGateway(dir); err != nil {
				return nil, err
			}
		}
		env := &e2eEnv{dir: dir, bin: bin, ws: ws, against: o.against}
		if o.against != "" {
			rep.Baseline = "docstream " + o.against
		}
		var latencies *bufio.Writer
		if o.latencies != "" {
			f, err := os.Create(o.latencies)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			latencies = bufio.NewWriter(f)
			latencies.WriteString(deltasHeader) // an error stays in latencies
			env.deltas = latencies
		}
		for _, c := range selected {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			logf("e2e: %s", c.Title)
			run := runCase
			if c.Replicas > 0 {
				run = runClusterCase
			}
			out := run(ctx, env, c)
			if o.smoke && len(caseFailures(out)) > 0 && ctx.Err() == nil {
				// A regression fails again; a load spike on a shared
				// machine seldom hits twice.
				logf("  %v; running the case again", caseFailures(out))
				out = run(ctx, env, c)
			}
			rep.E2E = append(rep.E2E, out)
			if out.Err != nil {
				logf("  error: %v", out.Err)
				continue
			}
			for _, side := range []struct {
				name string
				rs   rounds
			}{{"relay", out.Relay}, {"docstream", out.GW}} {
				for _, r := range side.rs {
					logf("  %-9s ok %d/%d  events %d  p50 %v p99 %v max %v  headers p99 %v  first delta p50 %v  %.0f ev/s  RSS %+.1f KB/stream, %.1f MiB at the end  CPU %v/event, %v/request  heap %.0f B/event, %d GCs %v",
						side.name, r.OK, r.Requests, r.Events, r.Lat.p(50), r.Lat.p(99), r.Lat.max(), r.TTH.p(99), r.TTFD.p(50), r.Rate,
						r.RSSPerStream()/1024, float64(r.RSSEnd)/(1<<20), r.CPUPerEvent(), r.CPUPerRequest(), r.AllocPerEvent(), r.GCs, r.Errors)
				}
			}
		}
		if latencies != nil {
			if err := latencies.Flush(); err != nil {
				return nil, fmt.Errorf("writing %s: %w", o.latencies, err)
			}
		}
		if longLine && ctx.Err() == nil {
			logf("longline: %s", longLineTitle)
			rep.LongLinePeak, rep.LongLineErr = runLongLine(bin, dir)
			logf("  peak RSS %.1f MiB %v", float64(rep.LongLinePeak)/(1<<20), rep.LongLineErr)
		}
	}
	rep.Duration = time.Since(rep.Started)
	return rep, nil
}

// e2eEnv is shared by the end-to-end cases.
type e2eEnv struct {
	dir, bin, ws string
	against      string    // a docstream binary to compare with instead of the relay
	deltas       io.Writer // where every delta's latency is written (-latencies), or nil
}

// agent returns the agent a case's servers run.
func (e *e2eEnv) agent(kind string) agentSetup {
	switch {
	case kind == "builtin":
		return agentSetup{Binary: inProcess, Workspace: e.ws}
	case strings.HasPrefix(kind, "child:"):
		return agentSetup{Binary: e.bin, Prefix: []string{"agent-sim", "--sim-speed=" + strings.TrimPrefix(kind, "child:")}, Workspace: e.ws}
	}
	panic("unknown agent kind " + kind)
}

// e2eCase is one end-to-end scenario, run against a fresh relay and a fresh
// gateway with the same agent.
type e2eCase struct {
	Key   string
	Title string
	Agent string // "child:<sim speed>" or "builtin"
	Spec  loadSpec
	Kind  string // what the case is for: latency, throughput, burst, idle
	// Spawn is the gateway's limits.spawn_per_second: 0 means 1000 (no
	// limit in effect), < 0 the gateway's default.
	Spawn float64
	// Rounds is how many times the case runs on each server (default 1).
	Rounds int
	// SQLite gives each gateway of the case a fresh SQLite store, the
	// default, instead of the in-memory one.
	SQLite bool
	// Defaults runs the real gateway with its default settings apart from
	// the agent, its workspace and the per-client rate limit.
	Defaults bool
	// Env holds more of the gateway's settings (DOCSTREAM_…=…).
	Env []string
	// Replicas > 0 runs the case on that many replicas on one PostgreSQL
	// beside one replica with SQLite, in place of the gateway and the relay.
	Replicas int
}

// The simulator spaces bench deltas 6 ms apart at speed 1: speed 0.6 gives
// 100 deltas/s (after a first-token delay of 350 ms / speed). The in-process
// backend takes its spacing from the prompt (every=…).
var fullCases = []e2eCase{
	// The real binary as it is configured by default, SQLite store and
	// spawn limit included: its memory after many runs, and its CPU per
	// request.
	{Key: "child-sequential", Title: "1,000 sequential runs, agent = simulator child (bench:20, no delays), default settings (SQLite store, spawn limit 20/s)",
		Agent: "child:0", Kind: "sequential", Defaults: true, Spawn: -1,
		Spec: loadSpec{Streams: 1, Runs: 1000, Prompt: "bench:20", Events: 20, Timeout: 5 * time.Minute}},
	// The same runs with the in-memory store: the relay keeps nothing, so
	// this is the CPU per request that compares with it.
	{Key: "child-sequential-memory", Title: "1,000 sequential runs, agent = simulator child (bench:20, no delays), in-memory store",
		Agent: "child:0", Kind: "sequential-memory",
		Spec: loadSpec{Streams: 1, Runs: 1000, Prompt: "bench:20", Events: 20, Timeout: 5 * time.Minute}},
	{Key: "child-1", Title: "1 stream × 100 ev/s, agent = simulator child", Agent: "child:0.6", Kind: "latency1", Rounds: 5,
		Spec: loadSpec{Streams: 1, Prompt: "bench:200", Events: 200, Timeout: 60 * time.Second}},
	// With 100 simulator processes on the machine the rounds of each side
	// spread over a factor of two or three: five rounds steady the median.
	{Key: "child-100", Title: "100 streams × 100 ev/s, agent = simulator child, started over 1 s, lines at spread instants", Agent: "child:0.6", Kind: "latency100", Rounds: 5,
		Spec: loadSpec{Streams: 100, Ramp: time.Second, Stagger: 10 * time.Millisecond, Prompt: "bench:200", Events: 200, Timeout: 60 * time.Second}},
	{Key: "child-burst", Title: "200 simultaneous requests, agent = simulator child (bench:20, no delays), spawn limit at its default (20/s)", Agent: "child:0", Kind: "burst",
		Spawn: -1, Rounds: 3, Spec: loadSpec{Streams: 200, Prompt: "bench:20", Events: 20, Timeout: 60 * time.Second}},
	{Key: "child-burst-nolimit", Title: "200 simultaneous requests, agent = simulator child (bench:20, no delays), spawn limit 1000/s", Agent: "child:0", Kind: "burst",
		Rounds: 3, Spec: loadSpec{Streams: 200, Prompt: "bench:20", Events: 20, Timeout: 60 * time.Second}},
	{Key: "child-max", Title: "1 stream as fast as possible, agent = simulator child (no delays)", Agent: "child:0", Kind: "throughput",
		Rounds: 3, Spec: loadSpec{Streams: 1, Prompt: "bench:50000", Events: 50000, Timeout: 60 * time.Second}},
	{Key: "builtin-1", Title: "1 stream × 100 ev/s, no child (in-process backend)", Agent: "builtin", Kind: "latency1", Rounds: 5,
		Spec: loadSpec{Streams: 1, Prompt: "bench:200 every=10ms", Events: 200, Timeout: 60 * time.Second}},
	{Key: "builtin-100", Title: "100 streams × 100 ev/s, no child, started over 1 s, lines at spread instants", Agent: "builtin", Kind: "latency100", Rounds: 3,
		Spec: loadSpec{Streams: 100, Ramp: time.Second, Stagger: 10 * time.Millisecond, Prompt: "bench:200 every=10ms", Events: 200, Timeout: 60 * time.Second}},
	// A stress case beside the targets: a stream starts every 10 ms and
	// writes every 10 ms, so the hundred streams' lines fall due together,
	// a hundred at once every 10 ms.
	{Key: "builtin-100-step", Title: "100 streams × 100 ev/s, no child, started over 1 s, lines in step (100 at once every 10 ms)", Agent: "builtin", Kind: "latency100step", Rounds: 3,
		Spec: loadSpec{Streams: 100, Ramp: time.Second, Prompt: "bench:200 every=10ms", Events: 200, Timeout: 60 * time.Second}},
	{Key: "builtin-1000", Title: "1,000 streams × 20 ev/s, no child, started over 3 s", Agent: "builtin", Kind: "latency1000", Rounds: 3,
		Spec: loadSpec{Streams: 1000, Ramp: 3 * time.Second, Prompt: "bench:120 every=50ms", Events: 120, Timeout: 90 * time.Second}},
	{Key: "builtin-burst", Title: "200 simultaneous requests, no child (bench:20)", Agent: "builtin", Kind: "burst",
		Rounds: 3, Spec: loadSpec{Streams: 200, Prompt: "bench:20", Events: 20, Timeout: 60 * time.Second}},
	// The same two with the store a gateway has by default, SQLite, which
	// the runs write while they stream.
	{Key: "builtin-100-sqlite", Title: "100 streams × 100 ev/s, no child, started over 1 s, lines at spread instants, SQLite store (the default)", Agent: "builtin", Kind: "latency100", Rounds: 3, SQLite: true,
		Spec: loadSpec{Streams: 100, Ramp: time.Second, Stagger: 10 * time.Millisecond, Prompt: "bench:200 every=10ms", Events: 200, Timeout: 60 * time.Second}},
	{Key: "builtin-burst-sqlite", Title: "200 simultaneous requests, no child (bench:20), SQLite store (the default)", Agent: "builtin", Kind: "burst",
		Rounds: 3, SQLite: true, Spec: loadSpec{Streams: 200, Prompt: "bench:20", Events: 20, Timeout: 60 * time.Second}},
	// Replicas on PostgreSQL, the streams spread round robin over three,
	// beside one replica with its SQLite store, with the same simulator
	// children; the docstream column is the three replicas.
	{Key: "cluster-100", Title: "100 streams × 100 ev/s over 3 replicas on PostgreSQL (docstream column) beside 1 replica on SQLite (other column), agent = simulator child, started over 1 s",
		Agent: "child:0.6", Kind: "cluster", Rounds: 3, Replicas: 3,
		Spec: loadSpec{Streams: 100, Ramp: time.Second, Stagger: 10 * time.Millisecond, Prompt: "bench:200", Events: 200, Timeout: 60 * time.Second}},
	{Key: "builtin-max", Title: "1 stream as fast as possible, no child", Agent: "builtin", Kind: "throughput",
		Rounds: 3, Spec: loadSpec{Streams: 1, Prompt: "bench:50000", Events: 50000, Timeout: 60 * time.Second}},
	{Key: "builtin-idle", Title: "1,000 idle streams, no child (one delta, then silence)", Agent: "builtin", Kind: "idle",
		Rounds: 1, Spec: loadSpec{Streams: 1000, Ramp: time.Second, Prompt: "bench:2 every=1h", Events: 2, Hold: 1, Timeout: 60 * time.Second}},
}

var smokeCases = []e2eCase{
	{Key: "child-sequential", Title: "10 sequential runs, agent = simulator child (bench:20, no delays), default settings", Agent: "child:0", Kind: "sequential",
		Defaults: true, Spawn: -1, Spec: loadSpec{Streams: 1, Runs: 10, Prompt: "bench:20", Events: 20, Timeout: 60 * time.Second}},
	{Key: "child-1", Title: "1 stream × 200 ev/s, agent = simulator child", Agent: "child:1.2", Kind: "latency1", Rounds: 3,
		Spec: loadSpec{Streams: 1, Prompt: "bench:100", Events: 100, Timeout: 60 * time.Second}},
	{Key: "builtin-1", Title: "1 stream × 200 ev/s, no child (in-process backend)", Agent: "builtin", Kind: "latency1", Rounds: 3,
		Spec: loadSpec{Streams: 1, Prompt: "bench:100 every=5ms", Events: 100, Timeout: 60 * time.Second}},
}

// spawnRate is the gateway's limits.spawn_per_second for a case.
func spawnRate(c e2eCase) float64 {
	if c.Spawn == 0 {
		return 1000
	}
	return c.Spawn
}

// e2eOutcome is one case measured on both servers.
type e2eOutcome struct {
	Case      e2eCase
	GW, Relay rounds
	Err       error
}

// runCase starts a relay and a gateway with the same agent, warms both up,
// then runs the case's rounds on them in alternating order, so that a
// passing load spike on the machine hits both alike and the median over the
// rounds ignores it.
func runCase(ctx context.Context, env *e2eEnv, c e2eCase) e2eOutcome {
	out := e2eOutcome{Case: c}
	a := env.agent(c.Agent)
	warm := loadSpec{Streams: 1, Prompt: "bench:5", Events: 5, Timeout: 30 * time.Second}
	if c.Agent == "builtin" {
		warm.Prompt = "bench:5 every=1ms"
	}
	var rl *server
	var err error
	if env.against != "" {
		if a.Binary == inProcess {
			out.Err = errors.New("-against compares the cases with a child; the others run the bench's own gateway")
			return out
		}
		rl, err = startGateway(env.against, env.dir, a, c)
		if rl != nil {
			rl.Name = "baseline"
		}
	} else {
		rl, err = startRelay(env.dir, a)
	}
	if err != nil {
		out.Err = fmt.Errorf("relay: %w", err)
		return out
	}
	defer rl.Stop()
	gw, err := startGateway(env.bin, env.dir, a, c)
	if err != nil {
		out.Err = fmt.Errorf("docstream: %w", err)
		return out
	}
	defer gw.Stop()
	for _, srv := range []*server{rl, gw} {
		if w := runLoad(ctx, srv.URL, 0, warm); !w.Complete {
			out.Err = fmt.Errorf("%s: warm-up failed: %v", srv.Name, w.Errors)
			return out
		}
	}
	for round := 0; round < max(c.Rounds, 1); round++ {
		order := []*server{rl, gw}
		if round%2 == 1 {
			order = []*server{gw, rl}
		}
		for _, srv := range order {
			if ctx.Err() != nil {
				out.Err = ctx.Err()
				return out
			}
			runtime.GC()
			spec := c.Spec
			spec.KeepDeltas = env.deltas != nil
			r := runLoad(ctx, srv.URL, srv.Pid(), spec)
			if env.deltas != nil {
				if err := writeDeltas(env.deltas, c.Key, srv.Name, round, r); err != nil {
					out.Err = fmt.Errorf("writing the latencies: %w", err)
					return out
				}
			}
			if srv == rl {
				out.Relay = append(out.Relay, r)
			} else {
				out.GW = append(out.GW, r)
			}
		}
	}
	return out
}
