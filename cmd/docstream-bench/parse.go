package main

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"syscall"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/sse"
	"github.com/docstream/docstream/translate"
)

// corpus is a set of transcripts, each decoded as one agent run.
type corpus struct {
	Name  string
	Real  bool // the real agent transcripts
	Files [][]byte
	Bytes int
	Lines int
}

func newCorpus(name string, files [][]byte) *corpus {
	c := &corpus{Name: name, Files: files}
	for _, f := range files {
		c.Bytes += len(f)
		c.Lines += countLines(f)
	}
	return c
}

func countLines(b []byte) int {
	n := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// loadCorpus reads dir/*.ndjson; it returns nil when dir has none.
func loadCorpus(dir string) (*corpus, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.ndjson"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var files [][]byte
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files = append(files, b)
	}
	if len(files) == 0 {
		return nil, nil
	}
	c := newCorpus(fmt.Sprintf("real corpus (%d files)", len(files)), files)
	c.Real = true
	return c, nil
}

// parseResult is one parsing benchmark on one corpus.
type parseResult struct {
	Stage        string
	MiBps        float64 // per core: bytes per CPU second of the process, with GOMAXPROCS=1
	WallMiBps    float64 // bytes per wall-clock second
	NsPerLine    float64 // CPU time per line
	AllocsPerLn  float64
	BytesPerLine float64 // allocated bytes per line
}

// parseStages are the stages measured, from the floor up.
var parseStages = []struct {
	Name string
	Fn   func(c *corpus) error
}{
	{"line split (bufio.Reader.ReadSlice)", benchSplit},
	{"typed JSON decode (encoding/json/v2, envelope struct)", benchTypedDecode},
	{"Docstream decoder (translate.Decoder)", benchDecoder},
	{"Docstream parse + segment", benchSegment},
	{"Docstream parse + segment + SSE encode", benchSegmentEncode},
}

// parseRepeats is how many times each stage is measured; the median
// counts, so that a moment of other load on the machine does not.
const parseRepeats = 5

// runParse measures every stage on c with one core for about d each. The
// stages take turns, one repeat of each at a time, so that a stretch of
// other load on the machine weighs on the floor and on Docstream alike.
func runParse(c *corpus, d time.Duration) ([]parseResult, error) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	rs := make([][]parseResult, len(parseStages))
	for range parseRepeats {
		for i, st := range parseStages {
			m, err := measure(func() error { return st.Fn(c) }, d/parseRepeats)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", st.Name, err)
			}
			rs[i] = append(rs[i], m.result(st.Name, c))
		}
	}
	out := make([]parseResult, len(rs))
	for i, r := range rs {
		slices.SortFunc(r, func(a, b parseResult) int { return cmp.Compare(a.MiBps, b.MiBps) })
		out[i] = r[len(r)/2]
	}
	return out, nil
}

// measurement is what measure saw over iters runs.
type measurement struct {
	iters          int
	wall, cpu      time.Duration
	mallocs, bytes uint64
}

// measure runs fn once to warm up, then repeatedly for at least d (and at
// least twice), and returns the wall-clock and CPU time (user + system of
// the whole process, so the garbage collector's work counts) and the
// allocations.
func measure(fn func() error, d time.Duration) (measurement, error) {
	if err := fn(); err != nil {
		return measurement{}, err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	c0, w0 := cpuTime(), time.Now()
	var m measurement
	for m.iters < 2 || time.Since(w0) < d {
		if err := fn(); err != nil {
			return m, err
		}
		m.iters++
	}
	m.wall, m.cpu = time.Since(w0), cpuTime()-c0
	runtime.ReadMemStats(&m1)
	m.mallocs, m.bytes = m1.Mallocs-m0.Mallocs, m1.TotalAlloc-m0.TotalAlloc
	return m, nil
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var r syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &r) != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func (m measurement) result(stage string, c *corpus) parseResult {
	p := parseResult{Stage: stage}
	if m.iters == 0 {
		return p
	}
	lines := float64(c.Lines) * float64(m.iters)
	bytes := float64(c.Bytes) * float64(m.iters)
	cpu := m.cpu
	if cpu <= 0 {
		cpu = m.wall
	}
	p.MiBps = bytes / cpu.Seconds() / (1 << 20)
	p.WallMiBps = bytes / m.wall.Seconds() / (1 << 20)
	p.NsPerLine = float64(cpu.Nanoseconds()) / lines
	p.AllocsPerLn = float64(m.mallocs) / lines
	p.BytesPerLine = float64(m.bytes) / lines
	return p
}

// The readers are reused across iterations, as a long-lived stream would
// reuse its buffer.
var (
	splitReader = bufio.NewReaderSize(nil, 64<<10)
	byteReader  = new(bytes.Reader)
)

func benchSplit(c *corpus) error {
	n := 0
	for _, f := range c.Files {
		byteReader.Reset(f)
		splitReader.Reset(byteReader)
		for {
			line, err := splitReader.ReadSlice('\n')
			n += len(line)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				break
			}
		}
	}
	if n != c.Bytes {
		return fmt.Errorf("split %d bytes of %d", n, c.Bytes)
	}
	return nil
}

// envelope is what a typed decoder needs of a line to route it and to take
// the text of deltas; tool calls are skipped, not kept.
type envelope struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	SessionID   string `json:"session_id"`
	CallID      string `json:"call_id"`
	TimestampMs int64  `json:"timestamp_ms"`
	Text        string `json:"text"`
	Message     *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
}

var decodeOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

func benchTypedDecode(c *corpus) error {
	for _, f := range c.Files {
		byteReader.Reset(f)
		splitReader.Reset(byteReader)
		for {
			line, err := readFullLine(splitReader)
			if len(bytes.TrimSpace(line)) > 0 {
				var e envelope
				if json.Unmarshal(line, &e, decodeOpts) != nil {
					e = envelope{}
				}
			}
			if err != nil {
				break
			}
		}
	}
	return nil
}

var longLine []byte

// readFullLine is ReadSlice that assembles lines longer than the buffer.
func readFullLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	longLine = append(longLine[:0], line...)
	for err == bufio.ErrBufferFull {
		line, err = br.ReadSlice('\n')
		longLine = append(longLine, line...)
	}
	return longLine, err
}

func benchDecoder(c *corpus) error {
	for _, f := range c.Files {
		byteReader.Reset(f)
		dec := translate.NewDecoder(byteReader, 0)
		for {
			_, err := dec.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					return err
				}
				break
			}
		}
	}
	return nil
}

var segOpts = translate.Options{ResponseID: "chat_0123456789abcdef01234567", Model: "auto", Mode: "agent",
	Created: "2026-11-22T12:00:00Z", Workspace: "/home/dev/project"}

func benchSegment(c *corpus) error {
	n := 0
	if err := segmentAll(c, func(documents.Event) { n++ }); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("no events")
	}
	return nil
}

func benchSegmentEncode(c *corpus) error {
	var encErr error
	err := segmentAll(c, func(ev documents.Event) {
		if _, err := sse.Encode(ev); err != nil && encErr == nil {
			encErr = err
		}
	})
	if err != nil {
		return err
	}
	return encErr
}

func segmentAll(c *corpus, emit func(documents.Event)) error {
	for _, f := range c.Files {
		byteReader.Reset(f)
		dec := translate.NewDecoder(byteReader, 0)
		seg := translate.NewSegmenter(segOpts, emit)
		seg.Start()
		if err := translate.Pump(dec, seg); err != nil {
			return err
		}
		seg.Close(translate.End{Exited: true})
	}
	return nil
}
