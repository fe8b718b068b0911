// Package metrics holds the Prometheus collectors that every part of
// Docstream counts into, on one registry.
package metrics

import (
	"cmp"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/docstream/docstream/documents"
)

// Metrics holds the gateway's Prometheus metrics, registered on their own
// registry so that several servers can live in one process.
type Metrics struct {
	Registry        *prometheus.Registry
	Requests        *prometheus.CounterVec
	RequestDuration *prometheus.HistogramVec
	RunsInFlight    prometheus.Gauge
	RunsLimit       prometheus.Gauge
	QueueLength     prometheus.Gauge
	Runs            *prometheus.CounterVec
	RunDuration     prometheus.Histogram
	FirstDocument   prometheus.Histogram
	Documents       *prometheus.CounterVec
	LinesSkipped    *prometheus.CounterVec
	Tokens          *prometheus.CounterVec
	AgentExits      *prometheus.CounterVec
	SpawnFailures   prometheus.Counter
	// AgentRecordFailures counts failed writes of a running agent's record
	// in the data directory (each retried).
	AgentRecordFailures prometheus.Counter
	Rejected            *prometheus.CounterVec
	Subscribers         prometheus.Gauge
	ConnectionLimit     prometheus.Gauge
	StoreErrors         prometheus.Counter
	// Connections counts the client connections open now.
	Connections atomic.Int64

	models sync.Map // the names of the models that get a label of their own
}

// CountTokens counts n tokens of a kind, when there are any: a counter panics
// on a negative Add (translate never reports one).
func (m *Metrics) CountTokens(kind, model string, n int64) {
	if n > 0 {
		m.Tokens.WithLabelValues(kind, m.ModelLabel(model)).Add(float64(n))
	}
}

// OtherModel is the model label of a run whose model is neither configured
// nor listed by the agent.
const OtherModel = "other"

// KnowModels gives the models names a label of their own.
func (m *Metrics) KnowModels(names ...string) {
	for _, n := range names {
		if n != "" {
			m.models.Store(n, nil)
		}
	}
}

// ModelLabel returns a run's model label: the model when it is known (see
// KnowModels), else OtherModel, so that the label's values stay bounded.
func (m *Metrics) ModelLabel(model string) string {
	model = cmp.Or(model, "auto")
	if _, known := m.models.Load(model); known {
		return model
	}
	return OtherModel
}

// New creates the metrics on a registry of their own.
func New() *Metrics {
	r := prometheus.NewRegistry()
	f := promauto.With(r)
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
	m := &Metrics{
		Registry: r,
		Requests: f.NewCounterVec(prometheus.CounterOpts{Name: "docstream_http_requests_total",
			Help: "HTTP requests by route, method and status code."}, []string{"route", "method", "code"}),
		RequestDuration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "docstream_http_request_duration_seconds",
			Help: "HTTP request durations (a streamed request lasts as long as its stream).", Buckets: latency}, []string{"route", "method"}),
		RunsInFlight: f.NewGauge(prometheus.GaugeOpts{Name: "docstream_runs_in_flight", Help: "Agent runs running now."}),
		RunsLimit:    f.NewGauge(prometheus.GaugeOpts{Name: "docstream_runs_limit", Help: "The configured maximum of concurrent runs."}),
		QueueLength:  f.NewGauge(prometheus.GaugeOpts{Name: "docstream_run_queue_length", Help: "Runs waiting for a slot."}),
		Runs: f.NewCounterVec(prometheus.CounterOpts{Name: "docstream_runs_total",
			Help: "Finished runs by outcome and model (a configured or listed model, else other)."}, []string{"outcome", "model"}),
		RunDuration: f.NewHistogram(prometheus.HistogramOpts{Name: "docstream_run_duration_seconds",
			Help: "Run durations.", Buckets: latency}),
		FirstDocument: f.NewHistogram(prometheus.HistogramOpts{Name: "docstream_time_to_first_document_seconds",
			Help: "Time from the request to the first document of its response.", Buckets: latency}),
		Documents: f.NewCounterVec(prometheus.CounterOpts{Name: "docstream_documents_total",
			Help: "Documents produced, by type."}, []string{"type"}),
		LinesSkipped: f.NewCounterVec(prometheus.CounterOpts{Name: "docstream_agent_lines_skipped_total",
			Help: "Agent output lines skipped, by reason."}, []string{"reason"}),
		Tokens: f.NewCounterVec(prometheus.CounterOpts{Name: "docstream_tokens_total",
			Help: "Tokens the agent reported, by kind and model (a configured or listed model, else other)."}, []string{"kind", "model"}),
		AgentExits: f.NewCounterVec(prometheus.CounterOpts{Name: "docstream_agent_exits_total",
			Help: "Agent process exits by exit code and signal; stopped_by is \"gateway\" when the gateway had signalled the agent (a cancel, a time limit, shutdown, a linger after the output ended)."}, []string{"code", "signal", "stopped_by"}),
		SpawnFailures: f.NewCounter(prometheus.CounterOpts{Name: "docstream_agent_spawn_failures_total",
			Help: "Agent processes that could not be started."}),
		AgentRecordFailures: f.NewCounter(prometheus.CounterOpts{Name: "docstream_agent_record_failures_total",
			Help: "Failed writes of a running agent's record in the data directory (retried; a crash sweep finds the agent by its mark without it)."}),
		Rejected: f.NewCounterVec(prometheus.CounterOpts{Name: "docstream_rejected_requests_total",
			Help: "Requests refused before any work, by reason."}, []string{"reason"}),
		Subscribers: f.NewGauge(prometheus.GaugeOpts{Name: "docstream_stream_subscribers", Help: "Clients attached to run streams."}),
		ConnectionLimit: f.NewGauge(prometheus.GaugeOpts{Name: "docstream_connections_limit",
			Help: "Client connections served at once; more are answered 503 too_many_connections."}),
		StoreErrors: f.NewCounter(prometheus.CounterOpts{Name: "docstream_store_write_errors_total",
			Help: "Writes to the store (turns, conversations, history fingerprints) that failed: what they held was served but is not kept."}),
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "docstream_connections_open", Help: "Client connections open now."},
		func() float64 { return float64(m.Connections.Load()) })
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	outcomes := []string{"completed", "error", "cancelled", "timeout", "interrupted", "shutdown", "agent_exit", "agent_error"}
	for _, o := range outcomes {
		m.Runs.WithLabelValues(o, "auto")
	}
	for _, t := range documents.Types {
		m.Documents.WithLabelValues(string(t))
	}
	for _, r := range []string{"not_json", "oversize", "unknown_type"} {
		m.LinesSkipped.WithLabelValues(r)
	}
	for _, k := range []string{"prompt", "completion", "cache_read", "cache_write"} {
		m.Tokens.WithLabelValues(k, "auto")
	}
	for _, r := range []string{"unauthorized", "rate_limited", "overloaded", "too_large", "bad_request", "connections"} {
		m.Rejected.WithLabelValues(r)
	}
	m.AgentExits.WithLabelValues("0", "", "")
	version, revision, goversion := Build()
	f.NewGaugeVec(prometheus.GaugeOpts{Name: "docstream_build_info", Help: "The build that runs: its module version, VCS revision and Go version (always 1)."},
		[]string{"version", "revision", "goversion"}).WithLabelValues(version, revision, goversion).Set(1)
	m.KnowModels("auto")
	m.Requests.WithLabelValues("/v1/chat", "POST", "200")
	m.RequestDuration.WithLabelValues("/v1/chat", "POST")
	return m
}

// Build returns the module version, the VCS revision (with "+dirty" when
// the tree had changes) and the Go version of the running binary.
func Build() (version, revision, goversion string) {
	version, revision, goversion = "(devel)", "unknown", runtime.Version()
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	version = cmp.Or(bi.Main.Version, version)
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	if revision != "unknown" && slices.Contains(bi.Settings, debug.BuildSetting{Key: "vcs.modified", Value: "true"}) {
		revision += "+dirty"
	}
	return
}
