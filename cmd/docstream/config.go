package main

import (
	"cmp"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/docstream/docstream/agent"
	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/cluster"
	"github.com/docstream/docstream/gateway"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/simulator"
	"github.com/docstream/docstream/store"
)

// Config is the whole configuration: config.yaml, then DOCSTREAM_<SECTION>_<KEY>
// environment overrides, then flags.
type Config struct {
	Server  gateway.ServerConfig `yaml:"server"`
	Auth    gateway.AuthConfig   `yaml:"auth"`
	Limits  runs.Limits          `yaml:"limits"`
	Agent   agent.Config         `yaml:"agent"`
	Runs    runs.Config          `yaml:"runs"`
	Store   store.Config         `yaml:"store"`
	OpenAI  openai.Config        `yaml:"openai"`
	Cloud   cloud.Config         `yaml:"cloud"`
	Cluster cluster.Config       `yaml:"cluster"`
	Log     LogConfig            `yaml:"log"`
	// Demo is set by --demo: the built-in simulator is the agent.
	Demo bool `yaml:"-"`
}

// LogConfig configures logging.
type LogConfig struct {
	Format string `yaml:"format"`
	Level  string `yaml:"level"`
}

// DefaultConfig returns the configuration used when nothing is set.
func DefaultConfig() Config {
	return Config{
		Server: gateway.ServerConfig{
			Addr: "127.0.0.1:8080", ReadHeaderTimeout: 10 * time.Second, ReadBodyTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
			ShutdownTimeout: 30 * time.Second, Heartbeat: 15 * time.Second, MaxBodyBytes: 4 << 20, MaxPromptBytes: gateway.MaxArgBytes,
			TrustedProxies: []string{}, CORSOrigins: []string{},
		},
		Auth:   gateway.AuthConfig{APIKeys: []string{}, RatePerMinute: 120, Burst: 30},
		Limits: runs.Limits{MaxConcurrentRuns: 16, QueueSize: 64, QueueTimeout: 60 * time.Second, SpawnPerSecond: 20},
		Agent: agent.Config{
			ArgsPrefix: []string{}, Headers: []string{}, Workspaces: map[string]string{},
			Trust: true, IdleTimeout: 30 * time.Minute, RunTimeout: 2 * time.Hour, LingerAfterResult: 3 * time.Second,
			KillGrace: 5 * time.Second, MaxLineBytes: agent.DefaultMaxLineBytes, StderrTailBytes: 16 << 10,
			Protocol: "print", Permissions: agent.PermissionsAsk, AllowCommands: []string{}, AllowMCPTools: []string{},
			AnswerTimeout: 10 * time.Minute,
			EnvAllow:      []string{"*"},
			EnvDeny: []string{"DOCSTREAM_*", "*KEY*", "*TOKEN*", "*SECRET*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*",
				"*COOKIE*", "*_AUTH", "*_AUTH_*", "AWS_*", "AZURE_*", "GOOGLE_APPLICATION_CREDENTIALS"},
		},
		Runs: runs.Config{DetachGrace: 30 * time.Second, KeepFinished: 15 * time.Minute, KeepFinishedBytes: 256 << 20,
			LogMaxEvents: 200000, LogMaxBytes: 128 << 20},
		Store:   store.Config{Driver: "sqlite", Path: "./data/docstream.db", MaxAge: 30 * 24 * time.Hour, MemoryMaxBytes: 256 << 20},
		OpenAI:  openai.Config{Render: "markdown", Reasoning: "reasoning_content", Aliases: map[string]openai.ModelAlias{}},
		Cloud:   cloud.Config{BaseURL: "https://api.cursor.com/v0", PollInterval: 2 * time.Second, RequestTimeout: 30 * time.Second},
		Cluster: cluster.Config{Heartbeat: 2 * time.Second, OwnerTimeout: 15 * time.Second},
		Log:     LogConfig{Format: "auto", Level: "info"},
	}
}

// LoadConfig reads the YAML file at path (none when path is "") over the
// defaults and applies the DOCSTREAM_* environment overrides.
func LoadConfig(path string, getenv func(string) string) (Config, error) {
	cfg := DefaultConfig()
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return cfg, fmt.Errorf("reading the configuration: %w", err)
		}
		defer f.Close()
		dec := yaml.NewDecoder(f)
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
			return cfg, fmt.Errorf("parsing %s: %w", path, err)
		}
		if doc.Kind != 0 {
			// The keys and values are checked first, so that an error
			// names the key, its line and what it takes.
			if err := checkNode(doc.Content[0], reflect.TypeOf(cfg), ""); err != nil {
				return cfg, fmt.Errorf("%s:%w", path, err)
			}
			if err := doc.Decode(&cfg); err != nil {
				return cfg, fmt.Errorf("parsing %s: %w", path, err)
			}
		}
		var more yaml.Node
		if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
			return cfg, fmt.Errorf("parsing %s: it holds more than one YAML document", path)
		}
	}
	for key, f := range keys(&cfg) {
		name := envName(key)
		if val := getenv(name); val != "" {
			if err := setValue(f, val); err != nil {
				return cfg, fmt.Errorf("%s=%q: %w", name, val, err)
			}
		}
	}
	cfg.Agent.APIKey = cmp.Or(cfg.Agent.APIKey, getenv("CURSOR_API_KEY"))
	cfg.Cloud.APIKey = cmp.Or(cfg.Cloud.APIKey, getenv("CURSOR_API_KEY"))
	return cfg, cfg.Validate()
}

// maxBufferBytes bounds the keys that size a buffer.
const maxBufferBytes = 1 << 30

// Validate checks the values that have to be sane for the gateway to run.
func (c *Config) Validate() error {
	switch {
	case c.Server.Addr == "":
		return errors.New("server.addr is empty")
	case c.Limits.MaxConcurrentRuns < 1:
		return errors.New("limits.max_concurrent_runs must be at least 1")
	case c.Server.MaxBodyBytes < 1024:
		return errors.New("server.max_body_bytes must be at least 1024")
	case c.Agent.StderrTailBytes > maxBufferBytes:
		return fmt.Errorf("agent.stderr_tail_bytes must be at most %d", maxBufferBytes)
	case c.Agent.MaxLineBytes > maxBufferBytes:
		return fmt.Errorf("agent.max_line_bytes must be at most %d", maxBufferBytes)
	case c.OpenAI.Render == openai.RenderToolCalls:
		return errors.New(`openai.render "tool_calls": tool calls break clients that did not ask for them; a request asks with "docstream_render": "tool_calls"`)
	}
	for key, f := range keys(c) {
		if f.CanInt() && f.Int() < 0 || f.CanFloat() && f.Float() < 0 {
			return fmt.Errorf("%s must not be negative", key)
		}
	}
	// An empty value of the first four keys takes its default.
	for _, e := range []struct {
		key, value string
		want       []string
	}{
		{"agent.protocol", cmp.Or(c.Agent.Protocol, "print"), []string{"print", "acp"}},
		{"agent.permissions", cmp.Or(c.Agent.Permissions, agent.PermissionsAsk), []string{agent.PermissionsAsk, agent.PermissionsAllow, agent.PermissionsDeny}},
		{"log.level", cmp.Or(c.Log.Level, "info"), []string{"trace", "debug", "info", "warn", "error"}},
		{"log.format", cmp.Or(c.Log.Format, "auto"), []string{"auto", "json", "console"}},
		{"openai.render", c.OpenAI.Render, []string{openai.RenderMarkdown, openai.RenderTextOnly}},
		{"openai.reasoning", c.OpenAI.Reasoning, []string{openai.ReasoningContent, openai.ReasoningThink, openai.ReasoningOff}},
		{"store.driver", c.Store.Driver, []string{"sqlite", "memory", "postgres"}},
	} {
		if n := len(e.want); !slices.Contains(e.want, e.value) {
			return fmt.Errorf("%s %q: want %s or %s", e.key, e.value, strings.Join(e.want[:n-1], ", "), e.want[n-1])
		}
	}
	for _, k := range c.Auth.APIKeys {
		// A malformed digest would be skipped, and with no other key auth
		// would be off: refuse it (without echoing it).
		if h, ok := strings.CutPrefix(strings.TrimSpace(k), "sha256:"); ok {
			if b, err := hex.DecodeString(h); err != nil || len(b) != 32 {
				return errors.New("auth.api_keys: an entry starting with sha256: must be followed by 64 hex digits")
			}
		}
	}
	if c.Auth.IsolateKeys && !c.Auth.HasKeys() {
		// Without keys every client is the same one: there would be no
		// tenants to keep apart, and the operator would believe there were.
		return errors.New("auth.isolate_keys needs API keys: set auth.api_keys (DOCSTREAM_AUTH_API_KEYS), or turn isolate_keys off")
	}
	if c.Store.Driver != "postgres" {
		return nil
	}
	if c.Store.DSN == "" {
		return errors.New("store.driver postgres needs store.dsn (DOCSTREAM_STORE_DSN), as in postgres://user:password@host:5432/docstream")
	}
	return c.Cluster.Check()
}

// checkNode checks a YAML node against the type it is decoded into: every
// key is one the type has (an error names the closest), a duration is
// written with its unit, and a whole number has no fraction (YAML would
// cut 1.9 to 1).
func checkNode(n *yaml.Node, t reflect.Type, key string) error {
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			name, at := n.Content[i].Value, strings.TrimPrefix(key+"."+n.Content[i].Value, ".")
			var field *reflect.StructField
			var known []string
			for f := range t.Fields() {
				if tag := f.Tag.Get("yaml"); tag == name && tag != "-" {
					field = &f
				} else if tag != "-" {
					known = append(known, tag)
				}
			}
			if field == nil {
				msg := fmt.Sprintf("%d: unknown key %q", n.Content[i].Line, at)
				if near := closest(name, known); near != "" {
					msg += fmt.Sprintf("; did you mean %q?", strings.TrimPrefix(key+"."+near, "."))
				}
				return errors.New(msg)
			}
			if err := checkNode(n.Content[i+1], field.Type, at); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkNode(n.Content[i+1], t.Elem(), key+"."+n.Content[i].Value); err != nil {
				return err
			}
		}
	case t == reflect.TypeFor[time.Duration]() && n.Kind == yaml.ScalarNode:
		if _, err := time.ParseDuration(n.Value); err != nil {
			return fmt.Errorf("%d: %s: %s", n.Line, key, durationHint(n.Value))
		}
	case (t.Kind() == reflect.Int || t.Kind() == reflect.Int64) && n.Kind == yaml.ScalarNode && n.Tag == "!!float":
		if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) {
			return fmt.Errorf("%d: %s: %s is not a whole number", n.Line, key, n.Value)
		}
	}
	return nil
}

// closest returns the name of names nearest to name, "" when none is near.
func closest(name string, names []string) string {
	best, out := 4, ""
	for _, n := range names {
		if d := editDistance(name, n); d < best {
			best, out = d, n
		}
	}
	return out
}

// durationHint says what a duration takes, for a value that is not one.
func durationHint(v string) string {
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return fmt.Sprintf("%s is a bare number, not a duration: give its unit, as in %ss or %sms", v, v, v)
	}
	return fmt.Sprintf("%q is not a duration: want a number with a unit, as in 30s, 5m or 2h", v)
}

// keys yields every key of cfg, as section.key, with the field it sets.
func keys(cfg *Config) iter.Seq2[string, reflect.Value] {
	return func(yield func(string, reflect.Value) bool) {
		for sf, section := range reflect.ValueOf(cfg).Elem().Fields() {
			if section.Kind() != reflect.Struct {
				continue
			}
			for kf, v := range section.Fields() {
				if !yield(sf.Tag.Get("yaml")+"."+kf.Tag.Get("yaml"), v) {
					return
				}
			}
		}
	}
}

// envName is the variable that sets a key: DOCSTREAM_<SECTION>_<KEY>.
func envName(key string) string {
	return "DOCSTREAM_" + strings.ToUpper(strings.Replace(key, ".", "_", 1))
}

// settingEnv are the DOCSTREAM_* variables a user sets: the configuration's
// and the simulator's.
var settingEnv = func() []string {
	names := []string{simulator.SpeedEnv, simulator.LogEnv, simulator.ScenarioEnv}
	for key := range keys(&Config{}) {
		names = append(names, envName(key))
	}
	slices.Sort(names)
	return names
}()

// harnessEnv are the DOCSTREAM_* variables the test harnesses read: the Go
// tests', the simulator's and the browser and SDK tests'.
var harnessEnv = []string{"DOCSTREAM_TEST_NORACE", "DOCSTREAM_TEST_PG", "DOCSTREAM_SIM_TEST_CHILD", "DOCSTREAM_BIN", "DOCSTREAM_URL"}

// serviceLinkEnv matches the variables Kubernetes sets for a Service named
// docstream (DOCSTREAM_SERVICE_HOST, DOCSTREAM_PORT_8080_TCP, …) unless
// enableServiceLinks is off.
var serviceLinkEnv = regexp.MustCompile(`^DOCSTREAM_(SERVICE_(HOST|PORT(_[A-Z0-9_]+)?)|PORT_[0-9]+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)$`)

// unknownEnv returns the DOCSTREAM_* variables of environ (NAME=value
// entries) that nothing reads, sorted.
func unknownEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "DOCSTREAM_") || slices.Contains(settingEnv, name) || slices.Contains(harnessEnv, name) ||
			serviceLinkEnv.MatchString(name) || name == "DOCSTREAM_PORT" && strings.Contains(val, "://") {
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// editDistance is the number of single-byte insertions, deletions,
// substitutions and swaps of neighbours that turn a into b.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// setValue sets f from an environment value: a list is comma-separated,
// a map name=value pairs.
func setValue(f reflect.Value, val string) error {
	if f.Type() == reflect.TypeFor[time.Duration]() {
		d, err := time.ParseDuration(val)
		if err != nil {
			return errors.New(durationHint(val))
		}
		f.SetInt(int64(d))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(val)
	case reflect.Bool:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return errors.New("want true or false")
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return errors.New("want a whole number, as in 1024")
		}
		f.SetInt(n)
	case reflect.Float64:
		n, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return errors.New("want a number, as in 20 or 0.5")
		}
		f.SetFloat(n)
	case reflect.Slice:
		var items []string
		for s := range strings.SplitSeq(val, ",") {
			if s = strings.TrimSpace(s); s != "" {
				items = append(items, s)
			}
		}
		f.Set(reflect.ValueOf(items))
	case reflect.Map:
		if f.Type().Elem().Kind() != reflect.String {
			return errors.New("this key can only be set in config.yaml")
		}
		m := map[string]string{}
		for s := range strings.SplitSeq(val, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(s), "=")
			if !ok {
				return fmt.Errorf("want name=value pairs, got %q", s)
			}
			m[k] = v
		}
		f.Set(reflect.ValueOf(m))
	default:
		return fmt.Errorf("unsupported type %s", f.Type())
	}
	return nil
}
