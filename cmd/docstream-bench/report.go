package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// row is one line of the results table.
type row struct {
	Measure, Scenario, Docstream, Baseline, Ratio, Target, Met string
}

// verdict renders whether a target is met.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < 10*time.Microsecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	case d < time.Millisecond:
		return fmt.Sprintf("%d µs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func fmtKB(b float64) string { return fmt.Sprintf("%.1f KB", b/1024) }

func fmtMiB(b float64) string { return fmt.Sprintf("%.1f MiB", b/(1<<20)) }

func ratio(a, b float64) string {
	if b <= 0 || a <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func added(gw, relay time.Duration) string {
	return fmt.Sprintf("%s (%s)", signed(gw-relay), ratio(float64(gw), float64(relay)))
}

func stage(rs []parseResult, prefix string) parseResult {
	for _, r := range rs {
		if strings.HasPrefix(r.Stage, prefix) {
			return r
		}
	}
	return parseResult{}
}

// rows builds the table.
func (rep *report) rows() []row {
	var rows []row
	for _, ps := range rep.Parse {
		c := ps.Corpus
		sc := fmt.Sprintf("%s: %d lines, %.1f MiB, %d B/line", c.Name, c.Lines, float64(c.Bytes)/(1<<20), c.Bytes/max(c.Lines, 1))
		split := stage(ps.Results, "line split")
		typed := stage(ps.Results, "typed JSON")
		dec := stage(ps.Results, "Docstream decoder")
		seg := stage(ps.Results, "Docstream parse + segment")
		enc := stage(ps.Results, "Docstream parse + segment + SSE")
		mibps := row{"parse + segment, MiB/s per core", sc,
			fmt.Sprintf("%.0f MiB/s (%.2f µs/line)", seg.MiBps, seg.NsPerLine/1000),
			fmt.Sprintf("typed decode %.0f MiB/s; line split %.0f MiB/s", typed.MiBps, split.MiBps),
			fmt.Sprintf("%s of typed decode", ratio(seg.MiBps, typed.MiBps)), "", ""}
		if c.Real {
			mibps.Target, mibps.Met = parseLimit, verdict(parseUse(seg.MiBps, typed.MiBps) <= 1)
		}
		rows = append(rows, mibps,
			row{"parse + segment, allocations per line", sc,
				fmt.Sprintf("%.2f (%.0f B)", seg.AllocsPerLn, seg.BytesPerLine),
				fmt.Sprintf("typed decode %.2f (%.0f B); split %.2f", typed.AllocsPerLn, typed.BytesPerLine, split.AllocsPerLn),
				"", "", ""},
			row{"decoder alone / + SSE encode, MiB/s per core", sc,
				fmt.Sprintf("%.0f / %.0f MiB/s (%.2f / %.2f allocs/line)", dec.MiBps, enc.MiBps, dec.AllocsPerLn, enc.AllocsPerLn),
				"", "", "", ""},
		)
	}
	for _, o := range rep.E2E {
		rows = append(rows, e2eRows(o)...)
	}
	return rows
}

// durCell renders the median of a duration over the rounds, with the range
// when there was more than one round.
func durCell(rs rounds, f func(*loadResult) time.Duration) string {
	m, lo, hi := rs.dur(f)
	if len(rs) < 2 {
		return fmtDur(m)
	}
	return fmt.Sprintf("%s (%s–%s)", fmtDur(m), fmtDur(lo), fmtDur(hi))
}

func med(rs rounds, f func(*loadResult) time.Duration) time.Duration {
	m, _, _ := rs.dur(f)
	return m
}

var (
	latP50    = func(r *loadResult) time.Duration { return r.Lat.p(50) }
	latP99    = func(r *loadResult) time.Duration { return r.Lat.p(99) }
	latMax    = func(r *loadResult) time.Duration { return r.Lat.max() }
	tthP50    = func(r *loadResult) time.Duration { return r.TTH.p(50) }
	tthP99    = func(r *loadResult) time.Duration { return r.TTH.p(99) }
	ttfdP50   = func(r *loadResult) time.Duration { return r.TTFD.p(50) }
	ttfdP99   = func(r *loadResult) time.Duration { return r.TTFD.p(99) }
	rate      = func(r *loadResult) float64 { return r.Rate }
	rssPer    = func(r *loadResult) float64 { return r.RSSPerStream() }
	rssEnd    = func(r *loadResult) float64 { return float64(r.RSSEnd) }
	cpuPer    = func(r *loadResult) time.Duration { return r.CPUPerEvent() }
	cpuPerReq = func(r *loadResult) time.Duration { return r.CPUPerRequest() }
)

// e2eRows are the rows of one end-to-end case: medians over its rounds.
func e2eRows(o e2eOutcome) []row {
	c := o.Case
	title := c.Title
	if c.Rounds > 1 {
		title += fmt.Sprintf(", %d rounds", c.Rounds)
	}
	if o.Err != nil {
		return []row{{"end to end", title, "error: " + o.Err.Error(), "", "", "", verdict(false)}}
	}
	g, r := o.GW, o.Relay
	var rows []row
	if !g.complete() || !r.complete() {
		rows = append(rows, row{"streams complete", title, g.summary(), r.summary(), "", "all", verdict(g.complete())})
	}
	cmp := func(measure string, f func(*loadResult) time.Duration) row {
		return row{measure, title, durCell(g, f), durCell(r, f), added(med(g, f), med(r, f)), "", ""}
	}
	both := func(measure string, f1, f2 func(*loadResult) time.Duration) row {
		return row{measure, title, fmtDur(med(g, f1)) + " / " + fmtDur(med(g, f2)), fmtDur(med(r, f1)) + " / " + fmtDur(med(r, f2)),
			ratio(float64(med(g, f2)), float64(med(r, f2))), "", ""}
	}
	// Memory is the growth of the server's RSS while all the streams were
	// open, in the round where it grew most: the first, on a fresh process
	// (later rounds reuse what the first one allocated).
	memRow := func(measure string) row {
		_, _, gm := g.stat(rssPer)
		_, _, rm := r.stat(rssPer)
		return row{measure, title, fmtKB(gm), fmtKB(rm), ratio(gm, rm), "", ""}
	}
	switch c.Kind {
	case "latency1", "latency100", "latency100step", "latency1000":
		p50 := cmp("added latency per event, p50", latP50)
		p99 := cmp("added latency per event, p99", latP99)
		mx := cmp("latency per event, max", latMax)
		tth := cmp("time to response headers, p99", tthP99)
		switch c.Kind {
		case "latency1":
			p50.Target, p50.Met = boundP50.cell(g, r)
			p99.Target, p99.Met = boundP99.cell(g, r)
		case "latency100":
			p99.Target, p99.Met = bound100.cell(g, r)
		case "latency1000":
			p99.Target, p99.Met = bound1000.cell(g, r)
		}
		rows = append(rows, p50, p99, mx, tth, both("time to first delta, p50 / p99", ttfdP50, ttfdP99))
		if c.Spec.Streams >= 100 {
			gr, _, _ := g.stat(rate)
			rr, _, _ := r.stat(rate)
			rows = append(rows, memRow("RSS per active stream (server process only)"),
				row{"events/s delivered", title, fmt.Sprintf("%.0f", gr), fmt.Sprintf("%.0f", rr), ratio(gr, rr), "", ""},
				cmp("server CPU per event (agents not counted)", cpuPer))
			rows = append(rows, allocRow(title, g, r)...)
		}
	case "cluster":
		gr, _, _ := g.stat(rate)
		rr, _, _ := r.stat(rate)
		rows = append(rows, cmp("added latency per event, p50", latP50), cmp("added latency per event, p99", latP99),
			both("time to response headers, p50 / p99", tthP50, tthP99), both("time to first delta, p50 / p99", ttfdP50, ttfdP99),
			row{"events/s delivered", title, fmt.Sprintf("%.0f", gr), fmt.Sprintf("%.0f", rr), ratio(gr, rr), "", ""})
	case "throughput":
		gr, glo, ghi := g.stat(rate)
		rr, rlo, rhi := r.stat(rate)
		rows = append(rows, row{"events/s, one stream as fast as possible", title, fmt.Sprintf("%.0f (%.0f–%.0f)", gr, glo, ghi),
			fmt.Sprintf("%.0f (%.0f–%.0f)", rr, rlo, rhi), ratio(gr, rr), "", ""},
			cmp("server CPU per event (agents not counted)", cpuPer))
		rows = append(rows, allocRow(title, g, r)...)
	case "burst":
		rows = append(rows, both("time to response headers, p50 / p99", tthP50, tthP99), both("time to first delta, p50 / p99", ttfdP50, ttfdP99))
	case "idle":
		mem := memRow("RSS per idle stream (server process only)")
		mem.Target, mem.Met = boundIdle.cell(g, r)
		rows = append(rows, mem)
	case "sequential", "sequential-memory":
		gm, _, _ := g.stat(rssEnd)
		rm, _, _ := r.stat(rssEnd)
		gb, _, _ := g.stat(func(x *loadResult) float64 { return float64(x.RSSBase) })
		rb, _, _ := r.stat(func(x *loadResult) float64 { return float64(x.RSSBase) })
		rss := row{"RSS after the runs (before them)", title, fmt.Sprintf("%s (%s)", fmtMiB(gm), fmtMiB(gb)),
			fmt.Sprintf("%s (%s)", fmtMiB(rm), fmtMiB(rb)), ratio(gm, rm), "", ""}
		rss.Target, rss.Met = boundRSS.cell(g, r)
		cpu := cmp("server CPU per request (agents not counted)", cpuPerReq)
		cpu.Target, cpu.Met = boundCPU.cell(g, r)
		rows = append(rows, rss, cpu, cmp("added latency per event, p50", latP50), cmp("added latency per event, p99", latP99),
			both("time to response headers, p50 / p99", tthP50, tthP99))
	}
	return rows
}

// allocRow is the servers' Go heap allocation per event and their garbage
// collections per round (medians), when both servers report them.
func allocRow(title string, g, r rounds) []row {
	ga, _, _ := g.stat(func(x *loadResult) float64 { return x.AllocPerEvent() })
	ra, _, _ := r.stat(func(x *loadResult) float64 { return x.AllocPerEvent() })
	gc, _, _ := g.stat(func(x *loadResult) float64 { return float64(x.GCs) })
	rc, _, _ := r.stat(func(x *loadResult) float64 { return float64(x.GCs) })
	if ga < 0 || ra < 0 || gc < 0 || rc < 0 {
		return nil
	}
	return []row{{"server heap allocated per event / collections per round", title,
		fmt.Sprintf("%.0f B / %.0f", ga, gc), fmt.Sprintf("%.0f B / %.0f", ra, rc), ratio(ga, ra), "", ""}}
}

// markdown renders the report: the machine, the table, notes.
func (rep *report) markdown() string {
	var b strings.Builder
	kind := "full run"
	if rep.Smoke {
		kind = "smoke run"
	}
	fmt.Fprintf(&b, "Docstream benchmark (%s), %s, took %s.\n\n", kind, rep.Started.UTC().Format("2006-01-02 15:04 UTC"), rep.Duration.Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s. Load average (1/5/15 min) at the start %s, at the end %s.\n\n", rep.Machine, rep.LoadAt[0], rep.LoadAt[1])
	if rep.Baseline == "" {
		b.WriteString("## Bounds\n\n" + rep.boundsTable() + "\n## Every figure\n\n")
	}
	base := "bare relay / floor"
	if rep.Baseline != "" {
		base = rep.Baseline
	}
	fmt.Fprintf(&b, "| measure | scenario | Docstream | %s | added (ratio) | target | |\n", cell(base))
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range rep.rows() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", cell(r.Measure), cell(r.Scenario), cell(r.Docstream), cell(r.Baseline), cell(r.Ratio), cell(r.Target), cell(r.Met))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// smokeFailures lists gross regressions: never an absolute time, only
// ratios, plus streams that lost events.
func (rep *report) smokeFailures() []string {
	var fails []string
	for _, ps := range rep.Parse {
		seg := stage(ps.Results, "Docstream parse + segment")
		typed := stage(ps.Results, "typed JSON")
		if seg.MiBps < 0.1*typed.MiBps {
			fails = append(fails, fmt.Sprintf("%s: parse + segment %.0f MiB/s is below 10%% of typed decoding (%.0f MiB/s)", ps.Corpus.Name, seg.MiBps, typed.MiBps))
		}
	}
	for _, o := range rep.E2E {
		fails = append(fails, caseFailures(o)...)
	}
	return fails
}

// caseFailures are the smoke failures of one case.
func caseFailures(o e2eOutcome) []string {
	if o.Err != nil {
		return []string{fmt.Sprintf("%s: %v", o.Case.Title, o.Err)}
	}
	if !o.GW.complete() || !o.Relay.complete() {
		return []string{fmt.Sprintf("%s: incomplete streams: docstream %s; relay %s", o.Case.Title, o.GW.summary(), o.Relay.summary())}
	}
	if g, r := med(o.GW, latP99), med(o.Relay, latP99); g > 20*r {
		return []string{fmt.Sprintf("%s: per-event p99 %s is more than 20× the relay's %s", o.Case.Title, fmtDur(g), fmtDur(r))}
	}
	return nil
}

const (
	docsBegin = "<!-- docstream-bench:begin -->"
	docsEnd   = "<!-- docstream-bench:end -->"
)

// updateDocs replaces the text between the markers in path with text.
func updateDocs(path, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, docsBegin), strings.Index(s, docsEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s block", path, docsBegin, docsEnd)
	}
	s = s[:i+len(docsBegin)] + "\n" + text + "\n" + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}
