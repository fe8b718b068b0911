package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/store"
)

// TestConfigFileIsTheDefault keeps config.yaml, the documented defaults, and
// DefaultConfig the same.
func TestConfigFileIsTheDefault(t *testing.T) {
	got, err := LoadConfig("../../config.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("config.yaml differs from DefaultConfig:\n got %+v\nwant %+v", got, want)
	}
}

func TestConfigEnvOverrides(t *testing.T) {
	env := map[string]string{
		"DOCSTREAM_SERVER_ADDR":             "0.0.0.0:9",
		"DOCSTREAM_AGENT_BINARY":            "/bin/agent",
		"DOCSTREAM_AUTH_API_KEYS":           "a, b",
		"DOCSTREAM_RUNS_DETACH_GRACE":       "0s",
		"DOCSTREAM_AGENT_WORKSPACES":        "x=/tmp,y=/var",
		"DOCSTREAM_AGENT_FORCE":             "true",
		"DOCSTREAM_LIMITS_SPAWN_PER_SECOND": "2.5",
		"CURSOR_API_KEY":                    "inherited",
	}
	cfg, err := LoadConfig("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Addr != "0.0.0.0:9" || cfg.Agent.Binary != "/bin/agent" || !cfg.Agent.Force {
		t.Errorf("scalars not applied: %+v %+v", cfg.Server, cfg.Agent)
	}
	if strings.Join(cfg.Auth.APIKeys, "|") != "a|b" {
		t.Errorf("api keys %q", cfg.Auth.APIKeys)
	}
	if cfg.Runs.DetachGrace != 0 || cfg.Limits.SpawnPerSecond != 2.5 {
		t.Errorf("duration/float not applied: %v %v", cfg.Runs.DetachGrace, cfg.Limits.SpawnPerSecond)
	}
	if cfg.Agent.Workspaces["x"] != "/tmp" || cfg.Agent.Workspaces["y"] != "/var" {
		t.Errorf("workspaces %v", cfg.Agent.Workspaces)
	}
	if cfg.Agent.APIKey != "inherited" {
		t.Errorf("agent api key should fall back to CURSOR_API_KEY")
	}
	if _, err := LoadConfig("", func(k string) string {
		if k == "DOCSTREAM_RUNS_DETACH_GRACE" {
			return "soon"
		}
		return ""
	}); err == nil || !strings.Contains(err.Error(), "DOCSTREAM_RUNS_DETACH_GRACE") {
		t.Errorf("a bad duration must name its variable, got %v", err)
	}
	_ = time.Second
}

// TestConfigRefusesNonsense: values that cannot mean anything are refused
// at start with the key named, instead of panicking or misbehaving later.
func TestConfigRefusesNonsense(t *testing.T) {
	for _, c := range []struct{ env, val, want string }{
		{"DOCSTREAM_SERVER_HEARTBEAT", "-1s", "server.heartbeat must not be negative"},
		{"DOCSTREAM_SERVER_WRITE_TIMEOUT", "-1s", "server.write_timeout must not be negative"},
		{"DOCSTREAM_LIMITS_QUEUE_SIZE", "-1", "limits.queue_size must not be negative"},
		{"DOCSTREAM_LIMITS_SPAWN_PER_SECOND", "-1", "limits.spawn_per_second must not be negative"},
		{"DOCSTREAM_AUTH_BURST", "-5", "auth.burst must not be negative"},
		{"DOCSTREAM_AGENT_KILL_GRACE", "-2s", "agent.kill_grace must not be negative"},
		{"DOCSTREAM_RUNS_LOG_MAX_EVENTS", "-1", "runs.log_max_events must not be negative"},
		{"DOCSTREAM_CLOUD_POLL_INTERVAL", "-1s", "cloud.poll_interval must not be negative"},
		{"DOCSTREAM_CLOUD_REQUEST_TIMEOUT", "-1s", "cloud.request_timeout must not be negative"},
		{"DOCSTREAM_AGENT_STDERR_TAIL_BYTES", "4611686018427387904", "agent.stderr_tail_bytes must be at most"},
		{"DOCSTREAM_AGENT_MAX_LINE_BYTES", "2147483648", "agent.max_line_bytes must be at most"},
		{"DOCSTREAM_LOG_LEVEL", "verbose", "log.level"},
		{"DOCSTREAM_LOG_FORMAT", "xml", "log.format"},
		{"DOCSTREAM_AUTH_ISOLATE_KEYS", "true", "auth.isolate_keys needs API keys"},
	} {
		_, err := LoadConfig("", func(k string) string {
			if k == c.env {
				return c.val
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: got %v, want an error with %q", c.env, c.val, err, c.want)
		}
	}
	// Files: want is a part of the error, or "" for a file that loads.
	path := t.TempDir() + "/config.yaml"
	for _, f := range []struct{ yaml, want string }{
		{"server:\n  heartbeat: 5s\n---\nserver:\n  heartbeat: nonsense\n", "more than one YAML document"},
		{"server:\n  heartbeat: 5s\n  bogus: 1\n", "bogus"},
		{"limits:\n  max_concurrent_runs: 1.9\n", "limits.max_concurrent_runs: 1.9 is not a whole number"},
		{"server:\n  max_body_bytes: 1e6\n", ""},
		{"auth:\n  isolate_keys: true\n  api_keys: [\"  \"]\n", "auth.isolate_keys needs API keys"},
		{"auth:\n  isolate_keys: true\n  api_keys: [k1, k2]\n", ""},
	} {
		if err := os.WriteFile(path, []byte(f.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(path, func(string) string { return "" })
		if (f.want == "" && err != nil) || (f.want != "" && (err == nil || !strings.Contains(err.Error(), f.want))) {
			t.Errorf("%q: got %v, want %q", f.yaml, err, f.want)
		}
	}
}

// TestStorePathChecked: a store path that cannot be a database file is
// refused before a lock file is made beside it (/dev/null left
// /dev/docstream.lock behind), and ~ is not taken for a directory name.
func TestStorePathChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, p := range []string{"/dev/null", dir, "~/ds/docstream.db"} {
		if err := store.CheckPath(p); err == nil {
			t.Errorf("%s: accepted", p)
		}
	}
	for _, p := range []string{"", dir + "/docstream.db", dir + "/new/docstream.db"} {
		if err := store.CheckPath(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
}

// TestConsoleLogWithoutTerminal: log.format console writes no colour codes
// where the output is not a terminal.
func TestConsoleLogWithoutTerminal(t *testing.T) {
	t.Parallel()
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log := newLogger(LogConfig{Format: "console", Level: "info"}, f)
	log.Info().Str("k", "v").Msg("hello")
	b, _ := os.ReadFile(f.Name())
	if !strings.Contains(string(b), "hello") || strings.Contains(string(b), "\x1b[") {
		t.Errorf("console log in a file: %q", b)
	}
}
