package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// contractMetrics are the gateway's metric families with their type and
// label names, as the gateway promises to export them.
var contractMetrics = map[string]struct {
	typ    dto.MetricType
	labels []string
}{
	"docstream_http_requests_total":            {dto.MetricType_COUNTER, []string{"route", "method", "code"}},
	"docstream_http_request_duration_seconds":  {dto.MetricType_HISTOGRAM, []string{"route", "method"}},
	"docstream_runs_in_flight":                 {dto.MetricType_GAUGE, nil},
	"docstream_runs_limit":                     {dto.MetricType_GAUGE, nil},
	"docstream_run_queue_length":               {dto.MetricType_GAUGE, nil},
	"docstream_runs_total":                     {dto.MetricType_COUNTER, []string{"outcome", "model"}},
	"docstream_run_duration_seconds":           {dto.MetricType_HISTOGRAM, nil},
	"docstream_time_to_first_document_seconds": {dto.MetricType_HISTOGRAM, nil},
	"docstream_documents_total":                {dto.MetricType_COUNTER, []string{"type"}},
	"docstream_agent_lines_skipped_total":      {dto.MetricType_COUNTER, []string{"reason"}},
	"docstream_tokens_total":                   {dto.MetricType_COUNTER, []string{"kind", "model"}},
	"docstream_build_info":                     {dto.MetricType_GAUGE, []string{"version", "revision", "goversion"}},
	"docstream_agent_exits_total":              {dto.MetricType_COUNTER, []string{"code", "signal", "stopped_by"}},
	"docstream_agent_spawn_failures_total":     {dto.MetricType_COUNTER, nil},
	"docstream_agent_record_failures_total":    {dto.MetricType_COUNTER, nil},
	"docstream_rejected_requests_total":        {dto.MetricType_COUNTER, []string{"reason"}},
	"docstream_stream_subscribers":             {dto.MetricType_GAUGE, nil},
	"docstream_connections_open":               {dto.MetricType_GAUGE, nil},
	"docstream_connections_limit":              {dto.MetricType_GAUGE, nil},
	"docstream_store_write_errors_total":       {dto.MetricType_COUNTER, nil},
}

// targetLabels are attached by Prometheus (or the Prometheus Operator) at
// scrape time, not by the gateway.
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "endpoint", "container"}

// syntheticSeries are series Prometheus makes itself for every target.
var syntheticSeries = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_series_added"}

// selectorUse is one metric reference in a query: the name as written and
// the label names the query relies on for it.
type selectorUse struct {
	where  string
	name   string
	labels []string
}

var promqlParser = parser.NewParser(parser.Options{})

// queryUses parses a PromQL expression and returns its metric references
// with the labels each one's matchers and the enclosing aggregations use.
func queryUses(where, expr string) ([]selectorUse, error) {
	root, err := promqlParser.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	uses := map[*parser.VectorSelector]*selectorUse{}
	var order []*parser.VectorSelector
	parser.Inspect(root, func(node parser.Node, path []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		var lbls []string
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName {
				if name == "" && m.Type == labels.MatchEqual {
					name = m.Value
				}
				continue
			}
			lbls = append(lbls, m.Name)
		}
		// Aggregations above this selector group by labels it must carry.
		for _, p := range path {
			if agg, ok := p.(*parser.AggregateExpr); ok && !agg.Without {
				lbls = append(lbls, agg.Grouping...)
			}
		}
		uses[vs] = &selectorUse{where: where, name: name, labels: lbls}
		order = append(order, vs)
		return nil
	})
	var out []selectorUse
	for _, vs := range order {
		out = append(out, *uses[vs])
	}
	return out, nil
}

// ruleUses returns the metric references of every alert in rules.yml, after
// checking that the file decodes strictly as Prometheus rule groups and that
// every annotation is a valid template.
func ruleUses(t *testing.T) []selectorUse {
	t.Helper()
	data, err := os.ReadFile("prometheus/rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var spec monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		t.Fatalf("rules.yml does not decode as Prometheus rule groups: %v", err)
	}
	// The functions Prometheus offers in alert templates; only their names
	// matter for parsing.
	funcs := template.FuncMap{}
	for _, f := range []string{"humanize", "humanize1024", "humanizeDuration", "humanizePercentage", "humanizeTimestamp",
		"query", "first", "label", "value", "sortByLabel", "strvalue", "args", "reReplaceAll", "match", "title", "toUpper",
		"toLower", "graphLink", "tableLink", "safeHtml", "pathPrefix", "externalURL", "parseDuration", "stripPort", "stripDomain", "toTime"} {
		funcs[f] = func(...any) any { return nil }
	}
	var uses []selectorUse
	seen := map[string]bool{}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name", g.Name)
				continue
			}
			if seen[r.Alert] {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			seen[r.Alert] = true
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %s needs a severity label and a summary annotation", r.Alert)
			}
			for k, v := range r.Annotations {
				text := "{{$labels := .Labels}}{{$value := .Value}}" + v
				if _, err := template.New(k).Funcs(funcs).Parse(text); err != nil {
					t.Errorf("alert %s annotation %s: %v", r.Alert, k, err)
				}
			}
			u, err := queryUses("alert "+r.Alert, r.Expr.String())
			if err != nil {
				t.Error(err)
				continue
			}
			uses = append(uses, u...)
		}
	}
	return uses
}

var grafanaVar = regexp.MustCompile(`\$(\{[A-Za-z0-9_]+(:[a-z]+)?\}|[A-Za-z0-9_]+)`)
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$`)

// expandGrafana replaces Grafana's variables with values PromQL accepts:
// interval variables with a duration, all others with a regex.
func expandGrafana(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v, "${}")
		name, _, _ = strings.Cut(name, ":")
		if strings.HasPrefix(name, "__") {
			switch name {
			case "__rate_interval", "__interval", "__range":
				return "5m"
			case "__interval_ms", "__range_ms":
				return "300000"
			case "__range_s":
				return "300"
			}
		}
		return ".+"
	})
}

type dashboardPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []map[string]any `json:"targets"`
	Panels     []dashboardPanel `json:"panels"`
}

// dashboardUses returns the metric references of every query of the
// dashboard (panels and templating), after basic shape checks.
func dashboardUses(t *testing.T) []selectorUse {
	t.Helper()
	var dash struct {
		UID        string           `json:"uid"`
		Title      string           `json:"title"`
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	readJSON(t, "grafana/dashboards/docstream.json", &dash)
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("dashboard needs a uid and a title")
	}
	var uses []selectorUse
	ids := map[int]bool{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			if p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q is wider than the grid", p.Title)
			}
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if uid, _ := p.Datasource["uid"].(string); uid != "${datasource}" {
				t.Errorf("panel %q does not use the datasource variable", p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				expr, _ := tg["expr"].(string)
				if expr == "" {
					t.Errorf("panel %q: a target without expr", p.Title)
					continue
				}
				u, err := queryUses(fmt.Sprintf("panel %q", p.Title), expandGrafana(expr))
				if err != nil {
					t.Error(err)
					continue
				}
				uses = append(uses, u...)
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := ""
		switch qq := v.Query.(type) {
		case string:
			q = qq
		case map[string]any:
			q, _ = qq["query"].(string)
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q))
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, q)
			continue
		}
		u, err := queryUses("variable "+v.Name, expandGrafana(m[1]))
		if err != nil {
			t.Error(err)
			continue
		}
		for i := range u {
			u[i].labels = append(u[i].labels, m[2])
		}
		uses = append(uses, u...)
	}
	return uses
}

// hpaMetricUses returns the Pods metrics the HorizontalPodAutoscaler scales
// on: they must be gauges the gateway exports.
func hpaMetricUses(t *testing.T) []selectorUse {
	t.Helper()
	var uses []selectorUse
	for _, o := range loadK8s(t) {
		if o.hpa == nil {
			continue
		}
		for _, m := range o.hpa.Spec.Metrics {
			if m.Pods != nil {
				uses = append(uses, selectorUse{where: "HorizontalPodAutoscaler " + o.hpa.Name, name: m.Pods.Metric.Name})
			}
		}
	}
	return uses
}

// TestQueriesParse runs without a gateway: every query parses as PromQL and
// names only the gateway's metrics (docstream_, and the Go and process
// collectors' go_ and process_) or Prometheus' own per-target series.
func TestQueriesParse(t *testing.T) {
	uses := append(ruleUses(t), dashboardUses(t)...)
	if len(uses) < 20 {
		t.Fatalf("found only %d metric references in rules and dashboard", len(uses))
	}
	for _, u := range uses {
		if u.name == "" {
			t.Errorf("%s: a selector without a metric name", u.where)
		} else if !strings.HasPrefix(u.name, "docstream_") && !strings.HasPrefix(u.name, "process_") &&
			!strings.HasPrefix(u.name, "go_") && !slices.Contains(syntheticSeries, u.name) {
			t.Errorf("%s: metric %s is not one of the gateway's", u.where, u.name)
		}
	}
	shown := dashboardUses(t)
	for name := range contractMetrics {
		found := false
		for _, u := range shown {
			if strings.HasPrefix(u.name, name) {
				found = true
			}
		}
		if !found {
			t.Errorf("the dashboard shows nothing of %s", name)
		}
	}
}

// resolveFamily maps a name used in a query to the scraped family that
// serves it: a counter, gauge or untyped family by its own name, or a
// histogram's _bucket/_sum/_count (a summary's _sum/_count) series.
func resolveFamily(name string, fams map[string]*dto.MetricFamily) (*dto.MetricFamily, string) {
	if f, ok := fams[name]; ok {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return nil, fmt.Sprintf("%s is a histogram: query %s_bucket, _sum or _count", name, name)
		case dto.MetricType_SUMMARY:
			return f, ""
		}
		return f, ""
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := fams[base]
		if !ok {
			break
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			return f, ""
		case dto.MetricType_SUMMARY:
			if suffix != "_bucket" {
				return f, ""
			}
		}
		return nil, fmt.Sprintf("%s: %s is a %s, it has no %s series", name, base, strings.ToLower(f.GetType().String()), suffix)
	}
	return nil, fmt.Sprintf("%s is not in /metrics", name)
}

func familyLabels(f *dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			out[lp.GetName()] = true
		}
	}
	return out
}

// gateway is a docstream process started for a test.
type gateway struct {
	cmd  *exec.Cmd
	base string
	logs *safeBuffer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// safeBuffer collects the gateway's output for failure reports.
type safeBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() < 1<<20 {
		b.buf.Write(p)
	}
	return len(p), nil
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startGateway runs `docstream <args> --addr 127.0.0.1:<port>` with the
// in-memory store and the extra environment, and waits up to 10 s for
// /healthz.
func startGateway(t *testing.T, bin string, env []string, extraArgs ...string) *gateway {
	t.Helper()
	addr := freeAddr(t)
	args := append(append([]string{}, extraArgs...), "--addr", addr)
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "DOCSTREAM_STORE_DRIVER=memory", "DOCSTREAM_LOG_FORMAT=json")
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &safeBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	// Agents started by the gateway share its output pipe: do not wait for
	// them to close it once the gateway itself has exited.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	g := &gateway{cmd: cmd, base: "http://" + addr, logs: logs}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// SIGTERM to the process group (the gateway and its agents), then
		// SIGKILL if it has not ended within 5 s.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("gateway output:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("docstream exited before serving: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(g.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer 200 within 10 s (last error %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chat sends POST /v1/chat {"prompt":"hello"} and waits for the JSON answer.
func (g *gateway) chat(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/v1/chat", strings.NewReader(`{"prompt":"hello"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/chat: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/chat: %s: %s", resp.Status, body)
	}
	var answer struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.ID == "" {
		t.Fatalf("POST /v1/chat did not answer a ChatResponse: %v: %s", err, body)
	}
	if answer.Status != "completed" {
		t.Errorf("POST /v1/chat: status %q: %s", answer.Status, body)
	}
}

func (g *gateway) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(g.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return fams
}

// TestMetricsLive starts the gateway in demo mode, makes one chat request,
// scrapes /metrics and checks that every metric the alert rules, the
// dashboard and the autoscaler use is served, with the labels they use; and
// that every metric family the gateway promises is there.
func TestMetricsLive(t *testing.T) {
	uses := append(ruleUses(t), dashboardUses(t)...)
	uses = append(uses, hpaMetricUses(t)...)
	bin := docstreamBinary(t)
	g := startGateway(t, bin, nil, "--demo")

	g.chat(t)

	// The agent's exit is counted when its process has been reaped, which
	// can trail the answer: scrape until everything is there, at most 5 s.
	var problems []string
	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams = g.scrape(t)
		problems = checkUses(uses, fams)
		problems = append(problems, checkContract(fams)...)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	sort.Strings(problems)
	problems = slices.Compact(problems)
	for _, p := range problems {
		t.Error(p)
	}
	if t.Failed() {
		var names []string
		for n, f := range fams {
			names = append(names, n+" ("+strings.ToLower(f.GetType().String())+")")
		}
		sort.Strings(names)
		t.Logf("families in /metrics: %s", strings.Join(names, ", "))
	}
}

func checkUses(uses []selectorUse, fams map[string]*dto.MetricFamily) []string {
	var problems []string
	for _, u := range uses {
		if slices.Contains(syntheticSeries, u.name) {
			continue
		}
		f, why := resolveFamily(u.name, fams)
		if f == nil {
			problems = append(problems, u.where+": "+why)
			continue
		}
		have := familyLabels(f)
		for _, l := range u.labels {
			if slices.Contains(targetLabels, l) || have[l] {
				continue
			}
			if l == "le" && strings.HasSuffix(u.name, "_bucket") {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s: %s has no label %q", u.where, u.name, l))
		}
	}
	return problems
}

func checkContract(fams map[string]*dto.MetricFamily) []string {
	var problems []string
	for name, want := range contractMetrics {
		f, ok := fams[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("contract: %s is missing from /metrics", name))
			continue
		}
		if f.GetType() != want.typ {
			problems = append(problems, fmt.Sprintf("contract: %s is a %s, want %s", name, f.GetType(), want.typ))
		}
		have := familyLabels(f)
		for _, l := range want.labels {
			if !have[l] {
				problems = append(problems, fmt.Sprintf("contract: %s has no label %q", name, l))
			}
		}
	}
	return problems
}

// TestConfigsAccepted starts the gateway, without --demo, with each
// configuration file this folder ships (the image's and the Kubernetes
// ConfigMap's): the gateway rejects unknown keys and bad values at start, so
// this catches a config the image or the pods would fail on. The environment
// stands in for what exists only in the container: the agent is the
// simulator behind the same binary, the workspace a temp dir, the store in
// memory. Then one chat goes through.
func TestConfigsAccepted(t *testing.T) {
	bin := docstreamBinary(t)
	configs := map[string][]byte{}
	data, err := os.ReadFile("docker/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	configs["docker/config.yaml"] = data
	for _, o := range loadK8s(t) {
		if o.cm != nil {
			if c, ok := o.cm.Data["config.yaml"]; ok {
				configs[o.file+" config.yaml"] = []byte(c)
			}
		}
	}
	for name, data := range configs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			env := []string{
				"DOCSTREAM_AGENT_BINARY=" + bin,
				"DOCSTREAM_AGENT_ARGS_PREFIX=agent-sim",
				"DOCSTREAM_AGENT_WORKSPACES=default=" + t.TempDir(),
			}
			g := startGateway(t, bin, env, "--config", path)
			resp, err := http.Get(g.base + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/readyz with %s: %s: %s", name, resp.Status, body)
			}
			g.chat(t)
		})
	}
}
