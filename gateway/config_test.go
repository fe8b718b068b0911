package gateway

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestConfigFileIsTheDefault keeps config.yaml, the documented defaults, and
// DefaultConfig the same.
func TestConfigFileIsTheDefault(t *testing.T) {
	got, err := LoadConfig("../config.yaml", func(string) string { return "" })
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
