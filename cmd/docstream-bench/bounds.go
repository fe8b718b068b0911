package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// bound is one of the bounds Docstream holds (docs/performance.md), judged
// on the end-to-end cases of the given kinds.
type bound struct {
	Measure, Limit string
	Kinds          []string
	// judge returns Docstream's and the relay's figures and how much of
	// the bound Docstream uses: met at ≤ 1, NaN when it cannot be told.
	judge func(g, r rounds) (gw, relay string, use float64)
}

// The end-to-end bounds.
var (
	boundP50 = bound{"added latency per event, 1 stream, p50", "≤ +50 µs", []string{"latency1"},
		func(g, r rounds) (string, string, float64) { return addedBy(g, r, latP50, 50*time.Microsecond) }}
	boundP99 = bound{"added latency per event, 1 stream, p99", "≤ +250 µs", []string{"latency1"},
		func(g, r rounds) (string, string, float64) { return addedBy(g, r, latP99, 250*time.Microsecond) }}
	bound100 = bound{"per-event p99, 100 streams", "≤ 2× the relay's", []string{"latency100"},
		func(g, r rounds) (string, string, float64) { return timesBy(g, r, latP99, 2) }}
	bound1000 = bound{"per-event p99, 1,000 streams × 20 ev/s", "≤ 10 ms", []string{"latency1000"},
		func(g, r rounds) (string, string, float64) {
			return fmtDur(med(g, latP99)), fmtDur(med(r, latP99)), float64(med(g, latP99)) / float64(10*time.Millisecond)
		}}
	boundIdle = bound{"memory per idle stream", "≤ 64 KB", []string{"idle"},
		func(g, r rounds) (string, string, float64) {
			// The first round, on a fresh process, grows the most.
			_, _, gm := g.stat(rssPer)
			_, _, rm := r.stat(rssPer)
			return fmtKB(gm), fmtKB(rm), gm / (64 << 10)
		}}
	boundRSS = bound{"RSS after 1,000 sequential runs, default settings", "≤ 48 MiB", []string{"sequential"},
		func(g, r rounds) (string, string, float64) {
			gm, _, _ := g.stat(rssEnd)
			rm, _, _ := r.stat(rssEnd)
			return fmtMiB(gm), fmtMiB(rm), gm / (48 << 20)
		}}
	boundCPU = bound{"server CPU per request, in-memory store", "≤ 2.5× the relay's", []string{"sequential-memory"},
		func(g, r rounds) (string, string, float64) { return timesBy(g, r, cpuPerReq, 2.5) }}
)

// addedBy judges Docstream's median of f against the relay's plus limit.
func addedBy(g, r rounds, f func(*loadResult) time.Duration, limit time.Duration) (string, string, float64) {
	gm, rm := med(g, f), med(r, f)
	return fmt.Sprintf("%s (%s)", fmtDur(gm), signed(gm-rm)), fmtDur(rm), float64(gm-rm) / float64(limit)
}

// timesBy judges Docstream's median of f against limit times the relay's.
func timesBy(g, r rounds, f func(*loadResult) time.Duration, limit float64) (string, string, float64) {
	gm, rm := med(g, f), med(r, f)
	use := math.NaN() // the relay's figure was too small to measure
	if rm > 0 {
		use = float64(gm) / float64(rm) / limit
	}
	return fmt.Sprintf("%s (%s)", fmtDur(gm), ratio(float64(gm), float64(rm))), fmtDur(rm), use
}

// signed renders a duration with its sign.
func signed(d time.Duration) string {
	if d < 0 {
		return "−" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}

// cell renders the bound's target and verdict for a row of the table.
func (b bound) cell(g, r rounds) (target, met string) {
	_, _, use := b.judge(g, r)
	return b.Limit, judged(use)
}

// judged renders whether a bound whose use is given is met.
func judged(use float64) string {
	if math.IsNaN(use) {
		return "–"
	}
	return verdict(use <= 1)
}

// parse + segment: ≥ 100 MiB/s per core on the real corpus, met on a
// shared machine at ≥ 0.8× the typed-decode floor of the same run.
const (
	parseFloorMiBps = 100
	parseFloorShare = 0.8
	parseLimit      = "≥ 100 MiB/s per core, or ≥ 0.8× the floor"
)

// parseUse is how much of the parse bound seg MiB/s uses against a floor
// of typed MiB/s: met at ≤ 1.
func parseUse(seg, typed float64) float64 {
	if seg <= 0 {
		return 1e9
	}
	return min(parseFloorMiBps/seg, parseFloorShare*typed/seg)
}

// boundRow is one row of the bounds table.
type boundRow struct {
	Measure, Where, Relay, Docstream, Limit, Met string
}

// boundRows judges every bound on what the run measured. A bound measured
// by several cases shows the one that comes nearest to it, or misses it.
func (rep *report) boundRows() []boundRow {
	var rows []boundRow
	for _, b := range []bound{boundP50, boundP99, bound100, bound1000, boundIdle, boundRSS} {
		rows = append(rows, rep.judge(b))
	}
	p := boundRow{Measure: "parse + segment, real corpus", Where: "–", Relay: "–", Docstream: "not measured", Limit: parseLimit, Met: "–"}
	for _, ps := range rep.Parse {
		if !ps.Corpus.Real {
			continue
		}
		seg := stage(ps.Results, "Docstream parse + segment")
		typed := stage(ps.Results, "typed JSON")
		p.Where = "real corpus"
		p.Relay = fmt.Sprintf("%.0f MiB/s (typed decode)", typed.MiBps)
		p.Docstream = fmt.Sprintf("%.0f MiB/s (%s the floor)", seg.MiBps, ratio(seg.MiBps, typed.MiBps))
		p.Met = judged(parseUse(seg.MiBps, typed.MiBps))
	}
	return append(rows, p, rep.judge(boundCPU), rep.longLineRow())
}

// judge is the row of an end-to-end bound.
func (rep *report) judge(b bound) boundRow {
	row := boundRow{Measure: b.Measure, Where: "–", Relay: "–", Docstream: "not measured", Limit: b.Limit, Met: "–"}
	worst := math.Inf(-1)
	for _, o := range rep.E2E {
		if !slices.Contains(b.Kinds, o.Case.Kind) {
			continue
		}
		switch {
		case o.Err != nil:
			return boundRow{b.Measure, o.Case.Key, "–", "error: " + o.Err.Error(), b.Limit, verdict(false)}
		case !o.GW.complete() || !o.Relay.complete():
			return boundRow{b.Measure, o.Case.Key, o.Relay.summary(), o.GW.summary(), b.Limit, verdict(false)}
		}
		gw, relay, use := b.judge(o.GW, o.Relay)
		if use > worst || math.IsNaN(use) && row.Met == "–" {
			row = boundRow{b.Measure, o.Case.Key, relay, gw, b.Limit, judged(use)}
		}
		if use > worst {
			worst = use
		}
	}
	return row
}

// boundsTable renders the bounds as a markdown table.
func (rep *report) boundsTable() string {
	var b strings.Builder
	b.WriteString("| bound | case | relay / floor | Docstream | bound | |\n|---|---|---|---|---|---|\n")
	for _, r := range rep.boundRows() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(r.Measure), cell(r.Where), cell(r.Relay), cell(r.Docstream), cell(r.Limit), cell(r.Met))
	}
	return b.String()
}

// docsBlock is what the documentation shows of a full run: the bounds
// table and a line saying when and where it ran.
func (rep *report) docsBlock() string {
	return fmt.Sprintf("Latest full run: %s on %s (load average %s at the start); every figure is in bench-results/latest.md.\n\n%s",
		rep.Started.UTC().Format("2006-01-02 15:04 UTC"), rep.Machine, rep.LoadAt[0], rep.boundsTable())
}
