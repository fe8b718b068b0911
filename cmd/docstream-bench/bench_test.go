package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/translate"
)

// docstreamBin is ./cmd/docstream, built once for the tests that need the
// real server or the simulator.
var docstreamBin string

func TestMain(m *testing.M) {
	// startRelay and startGateway run this executable in their hidden modes.
	if slices.Contains(os.Args[1:], "-relay-serve") || slices.Contains(os.Args[1:], "-gateway-serve") {
		os.Exit(run(os.Args[1:]))
	}
	dir, err := os.MkdirTemp("", "docstream-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	docstreamBin = filepath.Join(dir, "docstream")
	build := exec.Command("go", "build", "-o", docstreamBin, "github.com/docstream/docstream/cmd/docstream")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building docstream:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestParseTS(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{`[ts:1795351699463666049] `, 1795351699463666049, true},
		{`{"delta":" [ts:42]"}`, 42, true},
		{`[ts:1] [ts:2]`, 1, true},
		{`[ts:]`, 0, false},
		{`[ts:12`, 0, false},
		{`[ts:1x2]`, 0, false},
		{`[ts:12345678901234567890]`, 0, false},
		{`no mark`, 0, false},
	} {
		got, ok := parseTS([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("parseTS(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestEventTS(t *testing.T) {
	delta := `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"[ts:7] "}]},"session_id":"s","timestamp_ms":1}`
	flush := `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"[ts:7] [ts:8] "}]},"session_id":"s"}`
	result := `{"type":"result","subtype":"success","result":"[ts:7] ","session_id":"s"}`
	for _, c := range []struct {
		name, data string
		want       int64
		ok, done   bool
	}{
		{"content_delta", `{"documentId":"doc_001","delta":" [ts:9]"}`, 9, true, false},
		{"document_end", `{"documentId":"doc_001","finalContent":"[ts:9]"}`, 0, false, false},
		{"done", `{"id":"chat_1","status":"completed"}`, 0, false, true},
		{"", delta, 7, true, false},
		{"", flush, 0, false, false},
		{"", result, 0, false, true},
	} {
		got, ok := eventTS(c.name, []byte(c.data))
		if got != c.want || ok != c.ok {
			t.Errorf("eventTS(%q, %s) = %d, %v; want %d, %v", c.name, c.data, got, ok, c.want, c.ok)
		}
		if d := isDone(c.name, []byte(c.data)); d != c.done {
			t.Errorf("isDone(%q, %s) = %v", c.name, c.data, d)
		}
	}
}

func TestPercentile(t *testing.T) {
	var v []int64
	for i := int64(100); i >= 1; i-- {
		v = append(v, i)
	}
	d := newDist(v)
	for _, c := range []struct {
		p    float64
		want int64
	}{{50, 50}, {99, 99}, {100, 100}, {1, 1}, {0.001, 1}, {99.9, 100}, {90, 90}} {
		if got := percentile(d, c.p); got != c.want {
			t.Errorf("p%v of 1..100 = %d, want %d", c.p, got, c.want)
		}
	}
	if percentile(nil, 50) != 0 || newDist(nil).max() != 0 {
		t.Error("empty sample is not 0")
	}
	one := newDist([]int64{7})
	if one.p(50) != 7 || one.p(99) != 7 || one.max() != 7 {
		t.Error("one value")
	}
	if got := newDist([]int64{10, 20, 30, 40}).p(50); got != 20 {
		t.Errorf("p50 of 10..40 = %d, want 20 (nearest rank)", got)
	}
	if v[0] != 100 {
		t.Error("newDist sorted its input in place")
	}
}

func TestRunsStat(t *testing.T) {
	mk := func(vs ...float64) rounds {
		var rs rounds
		for _, v := range vs {
			rs = append(rs, &loadResult{Rate: v})
		}
		return rs
	}
	for _, c := range []struct {
		rs          rounds
		med, lo, hi float64
	}{
		{mk(3, 1, 2), 2, 1, 3},
		{mk(4, 1, 3, 2), 2.5, 1, 4},
		{mk(7), 7, 7, 7},
		{nil, 0, 0, 0},
	} {
		med, lo, hi := c.rs.stat(rate)
		if med != c.med || lo != c.lo || hi != c.hi {
			t.Errorf("stat = %v %v %v, want %v %v %v", med, lo, hi, c.med, c.lo, c.hi)
		}
	}
}

// TestStartPhases checks when the 100-stream cases' streams write, as an
// offset into the 10 ms between two lines of a stream: spread evenly with
// a stagger, all at once in step.
func TestStartPhases(t *testing.T) {
	const every = 10 * time.Millisecond
	for _, key := range []string{"child-100", "builtin-100", "builtin-100-step"} {
		i := slices.IndexFunc(fullCases, func(c e2eCase) bool { return c.Key == key })
		if i < 0 {
			t.Fatalf("no case %s", key)
		}
		spec := fullCases[i].Spec
		phases := map[time.Duration]int{}
		last := time.Duration(-1)
		for s := range spec.Streams {
			at := spec.startAt(s)
			if at <= last {
				t.Fatalf("%s: stream %d starts at %s, not after %s", key, s, at, last)
			}
			last = at
			phases[at%every]++
		}
		if last >= spec.Ramp+spec.Stagger {
			t.Errorf("%s: the last stream starts at %s", key, last)
		}
		want := spec.Streams // the targets' cases: one stream at each phase
		if fullCases[i].Kind == "latency100step" {
			want = 1 // every stream at the same phase
		}
		if len(phases) != want {
			t.Errorf("%s: %d distinct phases in %s, want %d", key, len(phases), every, want)
		}
	}
}

func TestReadSSE(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := ": comment\r\n\r\nid: 1\r\nevent: content_delta\r\ndata: {\"a\":1}\r\n\r\n" +
		"data: one\ndata: two\n\n" +
		"event: document_end\ndata: " + long + "\n\n" +
		"id: 9\n\n" +
		"data: last\n\n"
	type ev struct{ name, data string }
	var got []ev
	err := readSSE(strings.NewReader(in), func(name string, data []byte) bool {
		got = append(got, ev{name, string(data)})
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []ev{{"content_delta", `{"a":1}`}, {"", "one\ntwo"}, {"document_end", long}, {"", "last"}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %d events %.200v, want %d", len(got), got, len(want))
	}
	n := 0
	_ = readSSE(strings.NewReader(in), func(string, []byte) bool { n++; return false })
	if n != 1 {
		t.Fatalf("fn returning false did not stop the reader: %d calls", n)
	}
}

// relayEvents posts prompt to a relay and returns the data of its events.
func relayEvents(t *testing.T, url, prompt string) (http.Header, []string) {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat?stream=true", "application/json", strings.NewReader(fmt.Sprintf(`{"prompt":%q}`, prompt)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var data []string
	err = readSSE(resp.Body, func(name string, d []byte) bool {
		if name != "" {
			t.Errorf("relay event has a name %q", name)
		}
		data = append(data, string(d))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header, data
}

func TestRelayServesSSE(t *testing.T) {
	ws := t.TempDir()
	for _, a := range []relayConfig{
		{Agent: inProcess, Workspace: ws},
		{Agent: docstreamBin, Prefix: []string{"agent-sim", "--sim-speed=0"}, Workspace: ws},
	} {
		t.Run(filepath.Base(a.Agent), func(t *testing.T) {
			srv := httptest.NewServer(&relay{cfg: a})
			defer srv.Close()
			h, data := relayEvents(t, srv.URL, "bench:5")
			if ct := h.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			// init, user, 5 deltas, the final flush, result
			if len(data) != 9 {
				t.Fatalf("%d events, want 9: %q", len(data), data)
			}
			var types []string
			deltas := 0
			for _, d := range data {
				var line struct {
					Type string `json:"type"`
				}
				if err := json.Unmarshal([]byte(d), &line); err != nil {
					t.Fatalf("event is not an agent line: %v: %s", err, d)
				}
				types = append(types, line.Type)
				if _, ok := eventTS("", []byte(d)); ok {
					deltas++
				}
			}
			if deltas != 5 || types[0] != "system" || types[1] != "user" || types[8] != "result" {
				t.Fatalf("deltas %d, types %v", deltas, types)
			}
		})
	}
	t.Run("bad request", func(t *testing.T) {
		srv := httptest.NewServer(&relay{cfg: relayConfig{Agent: inProcess, Workspace: ws}})
		defer srv.Close()
		resp, err := http.Post(srv.URL+"/v1/chat", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

func TestRelayLongLine(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		fmt.Fprintf(pw, "{\"a\":%q}\n{\"b\":1}\n", strings.Repeat("y", 150<<10))
		pw.Close()
	}()
	rec := httptest.NewRecorder()
	rl := &relay{cfg: relayConfig{Agent: inProcess}}
	// Serve the relay loop on a fixed source.
	rl.copyLines(rec, http.NewResponseController(rec), pr)
	var got []string
	_ = readSSE(rec.Body, func(_ string, d []byte) bool { got = append(got, string(d)); return true })
	if len(got) != 2 || len(got[0]) != 150<<10+8 || got[1] != `{"b":1}` {
		t.Fatalf("got %d events", len(got))
	}
}

// TestBenchLinesMatchSimulator checks that the in-process source writes the
// lines the simulator writes for the same prompt: same types and keys in
// the same order, and the same text.
func TestBenchLinesMatchSimulator(t *testing.T) {
	var buf bytes.Buffer
	if err := writeBenchLines(context.Background(), &buf, "bench:3", "/w"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(docstreamBin, agentArgs([]string{"agent-sim", "--sim-speed=0"}, "", "bench:3")...).Output()
	if err != nil {
		t.Fatal(err)
	}
	ours, sims := splitLines(buf.Bytes()), splitLines(out)
	if len(ours) != len(sims) {
		t.Fatalf("%d lines, simulator %d", len(ours), len(sims))
	}
	for i := range ours {
		if k1, k2 := keys(t, ours[i]), keys(t, sims[i]); !slices.Equal(k1, k2) {
			t.Errorf("line %d keys %v, simulator %v", i, k1, k2)
		}
	}
	// Both go through the decoder and segmenter alike.
	fold := func(b []byte) (kinds []string, text string) {
		dec := translate.NewDecoder(bytes.NewReader(b), 0)
		var bld documents.Builder
		seg := translate.NewSegmenter(segOpts, func(ev documents.Event) { kinds = append(kinds, ev.Name()); bld.Add(ev) })
		seg.Start()
		if err := translate.Pump(dec, seg); err != nil {
			t.Fatal(err)
		}
		seg.Close(translate.End{Exited: true})
		resp := bld.Response()
		if len(resp.Documents) != 1 || resp.Status != documents.StatusCompleted || resp.Documents[0].Content == nil {
			t.Fatalf("documents %d, status %s", len(resp.Documents), resp.Status)
		}
		return kinds, *resp.Documents[0].Content
	}
	k1, t1 := fold(buf.Bytes())
	k2, t2 := fold(out)
	if !slices.Equal(k1, k2) || strings.Count(t1, "[ts:") != 3 || strings.Count(t2, "[ts:") != 3 {
		t.Fatalf("events %v / %v, text %s / %s", k1, k2, t1, t2)
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, slices.Clone(sc.Bytes()))
	}
	return out
}

// keys lists the member names of a JSON object, nested ones as a.b.
func keys(t *testing.T, line []byte) []string {
	t.Helper()
	dec := jsontext.NewDecoder(bytes.NewReader(line))
	var out []string
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if tok.Kind() == '"' && dec.StackDepth() > 0 {
			if k, n := dec.StackIndex(dec.StackDepth()); k == '{' && n%2 == 1 {
				out = append(out, string(dec.StackPointer()))
			}
		}
	}
}

func TestParseWaitEvery(t *testing.T) {
	var buf bytes.Buffer
	start := time.Now()
	if err := writeBenchLines(context.Background(), &buf, "bench:4 every=20ms", ""); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 60*time.Millisecond {
		t.Fatalf("4 deltas every 20ms took %s", el)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := writeBenchLines(ctx, io.Discard, "bench:3 every=1h", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled source returned %v", err)
	}
}

func TestGenTranscript(t *testing.T) {
	a := genTranscript(1<<20, 7)
	if len(a) < 1<<20 || !bytes.Equal(a, genTranscript(1<<20, 7)) {
		t.Fatalf("size %d, or not deterministic", len(a))
	}
	for i, line := range splitLines(a) {
		if !jsontext.Value(line).IsValid() {
			t.Fatalf("line %d is not valid JSON: %.200s", i+1, line)
		}
	}
	dec := translate.NewDecoder(bytes.NewReader(a), 0)
	var bld documents.Builder
	seg := translate.NewSegmenter(segOpts, bld.Add)
	seg.Start()
	if err := translate.Pump(dec, seg); err != nil {
		t.Fatal(err)
	}
	seg.Close(translate.End{Exited: true})
	st := seg.Stats()
	if st.NotJSON+st.Unknown+st.Oversize != 0 {
		t.Fatalf("skipped lines: %+v", st)
	}
	types := map[documents.Type]int{}
	for _, d := range bld.Response().Documents {
		types[d.Type]++
	}
	if types[documents.TypeText] == 0 || types[documents.TypeFileEdit] == 0 || types[documents.TypeTerminalCommand] == 0 {
		t.Fatalf("document types %v", types)
	}
	if bld.Response().Status != documents.StatusCompleted {
		t.Fatal("not completed")
	}
}

func TestParseBenchmarks(t *testing.T) {
	c := newCorpus("gen", [][]byte{genTranscript(256<<10, 3)})
	res, err := runParse(c, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(parseStages) {
		t.Fatalf("%d results", len(res))
	}
	for _, p := range res {
		if p.MiBps <= 0 || p.WallMiBps <= 0 || p.NsPerLine <= 0 {
			t.Errorf("%+v", p)
		}
		if strings.HasPrefix(p.Stage, "Docstream") && p.AllocsPerLn <= 0 {
			t.Errorf("%s: no allocations counted", p.Stage)
		}
	}
}

// testEnv returns an e2eEnv in a temporary folder, with its workspace, for
// a test that starts servers (skipped with -short).
func testEnv(t *testing.T) *e2eEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("starts servers")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return &e2eEnv{dir: dir, bin: docstreamBin, ws: ws}
}

// TestEndToEnd runs tiny cases against the real gateway and the relay.
func TestEndToEnd(t *testing.T) {
	env := testEnv(t)
	dir := env.dir
	var outs []e2eOutcome
	for _, c := range []e2eCase{
		{Key: "child", Title: "child", Agent: "child:0", Kind: "latency1",
			Spec: loadSpec{Streams: 3, Prompt: "bench:40", Events: 40, Timeout: 30 * time.Second}},
		{Key: "builtin", Title: "builtin", Agent: "builtin", Kind: "latency1", Rounds: 2,
			Spec: loadSpec{Streams: 2, Ramp: 20 * time.Millisecond, Prompt: "bench:30 every=2ms", Events: 30, Timeout: 30 * time.Second}},
		{Key: "idle", Title: "idle", Agent: "builtin", Kind: "idle",
			Spec: loadSpec{Streams: 5, Prompt: "bench:2 every=1h", Events: 2, Hold: 1, Timeout: 30 * time.Second}},
		{Key: "sqlite", Title: "sqlite", Agent: "builtin", Kind: "latency1", SQLite: true,
			Spec: loadSpec{Streams: 2, Prompt: "bench:20 every=2ms", Events: 20, Timeout: 30 * time.Second}},
		{Key: "sequential", Title: "sequential", Agent: "child:0", Kind: "sequential", Defaults: true, Spawn: -1,
			Spec: loadSpec{Streams: 1, Runs: 3, Prompt: "bench:10", Events: 10, Timeout: 30 * time.Second}},
		{Key: "sequential-memory", Title: "sequential, in memory", Agent: "child:0", Kind: "sequential-memory",
			Spec: loadSpec{Streams: 1, Runs: 3, Prompt: "bench:10", Events: 10, Timeout: 30 * time.Second}},
	} {
		t.Run(c.Key, func(t *testing.T) {
			stores := func() []string {
				dbs, _ := filepath.Glob(filepath.Join(dir, "store-*", "docstream.db"))
				return dbs
			}
			before := len(stores())
			out := runCase(context.Background(), env, c)
			outs = append(outs, out)
			if out.Err != nil {
				t.Fatal(out.Err)
			}
			if dbs := stores(); c.SQLite != (len(dbs) == before+1) {
				t.Fatalf("SQLite %v: store files %v", c.SQLite, dbs)
			}
			if len(out.GW) != max(c.Rounds, 1) || len(out.Relay) != max(c.Rounds, 1) {
				t.Fatalf("rounds: %d, %d", len(out.GW), len(out.Relay))
			}
			for side, r := range map[string]*loadResult{"docstream": out.GW[0], "relay": out.Relay[len(out.Relay)-1]} {
				want := c.Spec.Streams * max(c.Spec.Runs, 1) * c.Spec.Events
				if c.Spec.Hold > 0 {
					want = c.Spec.Streams * c.Spec.Hold
				}
				if !r.Complete || r.Events != want || len(r.Lat) != want {
					t.Fatalf("%s: complete %v, %d events, want %d; %v", side, r.Complete, r.Events, want, r.Errors)
				}
				if p := r.Lat.p(50); p <= 0 || p > time.Second {
					t.Errorf("%s: implausible latency p50 %s", side, p)
				}
				if r.TTH.p(50) <= 0 || r.TTFD.p(50) < r.TTH.p(50) {
					t.Errorf("%s: headers %s, first delta %s", side, r.TTH.p(50), r.TTFD.p(50))
				}
				if r.RSSBase <= 0 || r.RSSEnd <= 0 {
					t.Errorf("%s: no RSS", side)
				}
				if r.Requests != c.Spec.Streams*max(c.Spec.Runs, 1) || (c.Spec.Hold == 0 && r.OK != r.Requests) {
					t.Errorf("%s: %d of %d requests complete", side, r.OK, r.Requests)
				}
				// Each delta is at least decoded and framed: some bytes
				// per event, far less than a megabyte.
				if a := r.AllocPerEvent(); a < 16 || a > 1<<20 || r.GCs < 0 {
					t.Errorf("%s: %.0f bytes allocated per event, %d collections", side, a, r.GCs)
				}
			}
			if len(allocRow(c.Title, out.GW, out.Relay)) != 1 {
				t.Errorf("no allocation row")
			}
		})
	}
	rep := &report{Machine: machine(), E2E: outs}
	s := rep.markdown()
	if !strings.Contains(s, "| measure |") || !strings.Contains(s, "added latency per event, p99") || !strings.Contains(s, "RSS per idle stream") ||
		!strings.Contains(s, "RSS after the runs") || !strings.Contains(s, "## Bounds") {
		t.Fatalf("table: %s", s)
	}
	measured := []string{boundP50.Measure, boundP99.Measure, boundIdle.Measure, boundRSS.Measure, boundCPU.Measure}
	for _, b := range rep.boundRows() {
		if slices.Contains(measured, b.Measure) && (b.Where == "–" || b.Docstream == "not measured") {
			t.Errorf("bound %q: not judged: %+v", b.Measure, b)
		}
	}
	if f := rep.smokeFailures(); len(f) > 0 && !strings.Contains(strings.Join(f, " "), "20×") {
		t.Fatalf("smoke failures: %v", f)
	}
}

// deltaLine is one line of a -latencies file.
type deltaLine struct {
	key, server          string
	round, stream, place int
	emit, lat            int64
}

// readDeltaLines parses a -latencies file's lines (without its header).
func readDeltaLines(t *testing.T, text string) []deltaLine {
	t.Helper()
	var out []deltaLine
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 7 {
			t.Fatalf("line %q: %d fields", line, len(f))
		}
		var n [5]int64
		for i, s := range f[2:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			n[i] = v
		}
		out = append(out, deltaLine{f[0], f[1], int(n[0]), int(n[1]), int(n[2]), n[3], n[4]})
	}
	return out
}

// checkDeltaLines checks that lines hold every delta of streams × events for
// each server and round, each stream's in order, emitted one after the
// other and delivered within a second, and returns their latencies by
// server and round.
func checkDeltaLines(t *testing.T, lines []deltaLine, key string, servers []string, nRounds, streams, events int) map[string][][]int64 {
	t.Helper()
	if want := len(servers) * nRounds * streams * events; len(lines) != want {
		t.Fatalf("%d lines, want %d", len(lines), want)
	}
	lat := map[string][][]int64{}
	next := map[[3]any]int{}
	var prev deltaLine
	for _, l := range lines {
		if l.key != key || !slices.Contains(servers, l.server) || l.round < 0 || l.round >= nRounds || l.stream < 0 || l.stream >= streams {
			t.Fatalf("line %+v", l)
		}
		k := [3]any{l.server, l.round, l.stream}
		if next[k]++; l.place != next[k] {
			t.Fatalf("%+v: place %d, want %d", k, l.place, next[k])
		}
		if l.place > 1 && l.emit < prev.emit {
			t.Fatalf("%+v: delta %d emitted before the one before it", k, l.place)
		}
		if l.lat <= 0 || l.lat > int64(time.Second) {
			t.Fatalf("%+v: delta %d latency %d ns", k, l.place, l.lat)
		}
		if lat[l.server] == nil {
			lat[l.server] = make([][]int64, nRounds)
		}
		lat[l.server][l.round] = append(lat[l.server][l.round], l.lat)
		prev = l
	}
	return lat
}

// TestDeltaLatencies checks -latencies: every delta of every stream, round
// and server, with the latencies the table's figures are made of.
func TestDeltaLatencies(t *testing.T) {
	env := testEnv(t)
	dir := env.dir
	var buf bytes.Buffer
	env.deltas = &buf
	c := e2eCase{Key: "streams", Title: "streams", Agent: "builtin", Kind: "latency1", Rounds: 2,
		Spec: loadSpec{Streams: 3, Ramp: 30 * time.Millisecond, Prompt: "bench:25 every=2ms", Events: 25, Timeout: 30 * time.Second}}
	out := runCase(context.Background(), env, c)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	lat := checkDeltaLines(t, readDeltaLines(t, buf.String()), "streams", []string{"relay", "docstream"}, 2, 3, 25)
	for server, rs := range map[string]rounds{"relay": out.Relay, "docstream": out.GW} {
		for round, r := range rs {
			got := newDist(lat[server][round])
			if got.p(50) != r.Lat.p(50) || got.p(99) != r.Lat.p(99) || got.max() != r.Lat.max() {
				t.Errorf("%s round %d: the file's p50/p99/max %s/%s/%s, the result's %s/%s/%s", server, round,
					got.p(50), got.p(99), got.max(), r.Lat.p(50), r.Lat.p(99), r.Lat.max())
			}
		}
	}

	// The flag, through the command.
	file := filepath.Join(dir, "latencies.tsv")
	args := []string{"-only", "builtin-1", "-rounds", "1", "-gateway-bin", docstreamBin,
		"-latencies", file, "-docs", "", "-out", filepath.Join(dir, "table.md")}
	if code := run(args); code != 0 {
		t.Fatalf("docstream-bench %v: exit %d", args, code)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	body, ok := strings.CutPrefix(string(b), deltasHeader)
	if !ok {
		t.Fatalf("no header: %.200q", b)
	}
	checkDeltaLines(t, readDeltaLines(t, body), "builtin-1", []string{"relay", "docstream"}, 1, 1, 200)
}

// BenchmarkParseSegment is the parse + segment stage as a Go benchmark, for
// profiling (go test -bench ParseSegment -cpuprofile cpu.out).
func BenchmarkParseSegment(b *testing.B) {
	sets := map[string]*corpus{"generated": newCorpus("generated", [][]byte{genTranscript(8<<20, 1)})}
	if c, err := loadCorpus("../../../shared/fixtures/real"); err == nil && c != nil {
		sets["real"] = c
	}
	for name, c := range sets {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(c.Bytes))
			b.ReportAllocs()
			for b.Loop() {
				if err := benchSegment(c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBenchBackend runs the in-process backend to its result, and stops a
// run of it that waits between deltas.
func TestBenchBackend(t *testing.T) {
	run := func(ctx context.Context, prompt string) (translate.End, documents.ChatResponse) {
		var bld documents.Builder
		seg := translate.NewSegmenter(segOpts, bld.Add)
		seg.Start()
		end := benchBackend{}.Run(ctx, &runs.Spec{Prompt: prompt, Workspace: "/w"}, seg)
		seg.Close(end)
		return end, bld.Response()
	}
	end, resp := run(context.Background(), "bench:30 every=1ms")
	if end.Err != nil || end.Reason != "" || resp.Status != documents.StatusCompleted {
		t.Fatalf("end %+v, status %s", end, resp.Status)
	}
	if len(resp.Documents) != 1 || resp.Documents[0].Content == nil || strings.Count(*resp.Documents[0].Content, "[ts:") != 30 {
		t.Fatalf("documents %+v", resp.Documents)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() {
		cancel(&runs.Stop{Reason: documents.StopCancelled, Msg: "stopped by the test"})
	})
	start := time.Now()
	end, resp = run(ctx, "bench:3 every=1h")
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("the stopped run took %s", el)
	}
	if end.Reason != documents.StopCancelled || end.Message != "stopped by the test" || resp.Status == documents.StatusCompleted {
		t.Fatalf("end %+v, status %s", end, resp.Status)
	}
}

// TestBoundRows judges the bounds on made-up figures: the case nearest to
// a bound shows, a miss shows as one, what was not measured says so.
func TestBoundRows(t *testing.T) {
	lat := func(p50, p99 time.Duration) rounds {
		var v []int64
		for i := range 100 {
			switch {
			case i < 50:
				v = append(v, int64(p50))
			case i < 99:
				v = append(v, int64(p99))
			default:
				v = append(v, int64(p99)+1)
			}
		}
		return rounds{{Lat: newDist(v), Complete: true}}
	}
	one := func(key string, g, r rounds) e2eOutcome {
		return e2eOutcome{Case: e2eCase{Key: key, Kind: "latency1"}, GW: g, Relay: r}
	}
	seq := rounds{{Requests: 1000, CPU: 3 * time.Second, RSSEnd: 40 << 20, Complete: true}}
	seqRelay := rounds{{Requests: 1000, CPU: time.Second, RSSEnd: 12 << 20, Complete: true}}
	rep := &report{
		E2E: []e2eOutcome{
			one("a", lat(110*time.Microsecond, 300*time.Microsecond), lat(100*time.Microsecond, 200*time.Microsecond)),
			one("b", lat(140*time.Microsecond, 300*time.Microsecond), lat(100*time.Microsecond, 250*time.Microsecond)),
			{Case: e2eCase{Key: "s", Kind: "sequential"}, GW: seq, Relay: seqRelay},
			{Case: e2eCase{Key: "m", Kind: "sequential-memory"}, GW: seq, Relay: seqRelay},
		},
		Parse: []parseSet{{Corpus: &corpus{Real: true}, Results: []parseResult{
			{Stage: "typed JSON decode", MiBps: 90}, {Stage: "Docstream parse + segment", MiBps: 80}}}},
		LongLinePeak: 192 << 20,
	}
	got := map[string]boundRow{}
	for _, b := range rep.boundRows() {
		got[b.Measure] = b
	}
	if len(got) != 9 {
		t.Fatalf("%d bounds", len(got))
	}
	for _, c := range []struct {
		measure, where, met string
	}{
		{boundP50.Measure, "b", "met"},                         // +40 µs, the nearer of +10 and +40
		{boundP99.Measure, "a", "met"},                         // +100 µs
		{bound100.Measure, "–", "–"},                           // not measured
		{boundRSS.Measure, "s", "met"},                         // 40 MiB
		{boundCPU.Measure, "m", "**not met**"},                 // 3×
		{"parse + segment, real corpus", "real corpus", "met"}, // 80 MiB/s ≥ 0.8 × 90
		{longLineTitle, "default settings", "met"},             // 192 MiB of 560
	} {
		if b := got[c.measure]; b.Where != c.where || b.Met != c.met {
			t.Errorf("%s: %+v, want %s, %s", c.measure, b, c.where, c.met)
		}
	}
	if b := got[boundCPU.Measure]; b.Docstream != "3.00 ms (3.00×)" || b.Relay != "1.00 ms" {
		t.Errorf("CPU row %+v", b)
	}
	if b := got[longLineTitle]; b.Docstream != "192.0 MiB (0.34× the budget)" {
		t.Errorf("long-line row %+v", b)
	}
	rep.LongLinePeak = 600 << 20
	if b := rep.longLineRow(); b.Met != "**not met**" {
		t.Errorf("a long-line peak past the budget: %+v", b)
	}

	// The documentation gets the bounds table only.
	doc := filepath.Join(t.TempDir(), "doc.md")
	if err := os.WriteFile(doc, []byte("intro\n"+docsBegin+"\nold\n"+docsEnd+"\nafter\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateDocs(doc, rep.docsBlock()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(doc)
	text := string(b)
	rows := strings.Count(text, "\n| ") - 1 // the header
	if strings.Contains(text, "old") || !strings.HasSuffix(text, docsEnd+"\nafter\n") || rows != 9 || strings.Contains(text, "Every figure") {
		t.Fatalf("%d rows:\n%s", rows, text)
	}
	if err := updateDocs(filepath.Join(t.TempDir(), "none.md"), "x"); err == nil {
		t.Fatal("a missing file was updated")
	}
}
