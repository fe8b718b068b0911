package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// repoRoot is the module root: the tests run in deploy/.
const repoRoot = ".."

// deployFiles lists the files under deploy/ whose names end in one of exts.
func deployFiles(t *testing.T, exts ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(exts, filepath.Ext(path)) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// yamlDocuments splits a YAML stream into its documents, each decoded into a
// yaml.Node. Empty documents (a trailing "---") are dropped.
func yamlDocuments(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, err
		}
		if len(n.Content) == 0 {
			continue
		}
		docs = append(docs, &n)
	}
}

// splitYAML returns the raw text of every non-empty document of a YAML stream,
// re-encoded one by one (comments dropped), for typed decoding.
func splitYAML(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := yamlDocuments(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out [][]byte
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, b)
	}
	return out
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestFilesParse: every YAML file (all its documents) and every JSON file
// under deploy/ parses.
func TestFilesParse(t *testing.T) {
	yamls := deployFiles(t, ".yaml", ".yml")
	jsons := deployFiles(t, ".json")
	if len(yamls) < 10 || len(jsons) < 1 {
		t.Fatalf("found %d YAML and %d JSON files; expected the compose, Prometheus, Grafana and Kubernetes files", len(yamls), len(jsons))
	}
	for _, path := range yamls {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := yamlDocuments(data)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", path)
		}
		for i, d := range docs {
			var v any
			if err := d.Decode(&v); err != nil {
				t.Errorf("%s: document %d: %v", path, i+1, err)
			}
		}
	}
	for _, path := range jsons {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			t.Errorf("%s: trailing data after the JSON value", path)
		}
	}
}

// contractConfigKeys are the configuration sections and keys the gateway
// knows (config.yaml, DOCSTREAM_<SECTION>_<KEY>).
var contractConfigKeys = map[string][]string{
	"server": {"addr", "read_header_timeout", "read_body_timeout", "write_timeout", "shutdown_timeout", "heartbeat", "max_body_bytes", "max_prompt_bytes", "trusted_proxies", "cors_origins",
		"max_connections"},
	"auth":   {"api_keys", "rate_per_minute", "burst"},
	"limits": {"max_concurrent_runs", "queue_size", "queue_timeout", "spawn_per_second"},
	"agent": {"binary", "args_prefix", "api_key", "headers", "force", "trust", "approve_mcps", "workspaces", "default_workspace",
		"idle_timeout", "run_timeout", "linger_after_result", "kill_grace", "max_line_bytes", "stderr_tail_bytes"},
	"runs":    {"detach_grace", "keep_finished", "keep_finished_bytes", "log_max_events", "log_max_bytes"},
	"store":   {"driver", "path", "dsn"},
	"cluster": {"advertise_url", "secret", "heartbeat", "owner_timeout"},
	"openai":  {"render", "reasoning", "aliases"},
	"cloud":   {"base_url", "api_key", "poll_interval"},
	"log":     {"format", "level"},
}

// checkGatewayConfig checks a Docstream config.yaml against the known
// sections and keys, and that it holds no secret.
func checkGatewayConfig(t *testing.T, name string, data []byte) map[string]map[string]any {
	t.Helper()
	var cfg map[string]map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for section, keys := range cfg {
		known, ok := contractConfigKeys[section]
		if !ok {
			t.Errorf("%s: unknown section %q", name, section)
			continue
		}
		for key := range keys {
			if !slices.Contains(known, key) {
				t.Errorf("%s: unknown key %s.%s", name, section, key)
			}
		}
	}
	for _, secret := range [][2]string{{"agent", "api_key"}, {"auth", "api_keys"}, {"cloud", "api_key"}, {"store", "dsn"}, {"cluster", "secret"}} {
		if _, ok := cfg[secret[0]][secret[1]]; ok {
			t.Errorf("%s: %s.%s is a secret: it belongs in the environment (a Secret), not in the config file", name, secret[0], secret[1])
		}
	}
	if ws, ok := cfg["agent"]["workspaces"].(map[string]any); ok {
		def, _ := cfg["agent"]["default_workspace"].(string)
		if _, ok := ws[def]; !ok {
			t.Errorf("%s: agent.default_workspace %q is not one of agent.workspaces", name, def)
		}
	}
	return cfg
}

func TestContainerConfig(t *testing.T) {
	data, err := os.ReadFile("docker/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := checkGatewayConfig(t, "docker/config.yaml", data)
	if got := cfg["store"]["path"]; got != "/home/docstream/data/docstream.db" {
		t.Errorf("store.path = %v, want it on the data volume /home/docstream/data", got)
	}
	if ws, _ := cfg["agent"]["workspaces"].(map[string]any); ws != nil {
		for name, dir := range ws {
			if s, _ := dir.(string); !strings.HasPrefix(s, "/home/docstream/data/") {
				t.Errorf("workspace %s = %v: keep it on the data volume", name, dir)
			}
		}
	}
}
