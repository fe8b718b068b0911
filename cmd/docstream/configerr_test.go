package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigErrorsSayWhatToDo checks that a configuration error names the
// key (and its line) or the variable, says what it takes, and exits 2
// before anything listens.
func TestConfigErrorsSayWhatToDo(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		yaml string
		env  map[string]string
		want []string
	}{
		{yaml: "server:\n  adr: 127.0.0.1:0\n", want: []string{`:2: unknown key "server.adr"`, `did you mean "server.addr"?`}},
		{yaml: "sever:\n  addr: x\n", want: []string{`:1: unknown key "sever"`, `did you mean "server"?`}},
		{yaml: "openai:\n  aliases:\n    fast: {modle: m}\n", want: []string{`:3: unknown key "openai.aliases.fast.modle"`, `"openai.aliases.fast.model"`}},
		{yaml: "server:\n  write_timeout: 30\n", want: []string{":2: server.write_timeout: 30 is a bare number, not a duration", "30s"}},
		{yaml: "agent:\n  kill_grace: soon\n", want: []string{`agent.kill_grace: "soon" is not a duration`, "30s, 5m or 2h"}},
		{env: map[string]string{"DOCSTREAM_SERVER_WRITE_TIMEOUT": "30"}, want: []string{`DOCSTREAM_SERVER_WRITE_TIMEOUT="30"`, "bare number", "30s"}},
		{env: map[string]string{"DOCSTREAM_LIMITS_QUEUE_SIZE": "many"}, want: []string{`DOCSTREAM_LIMITS_QUEUE_SIZE="many": want a whole number`}},
		{env: map[string]string{"DOCSTREAM_AGENT_FORCE": "yes please"}, want: []string{`DOCSTREAM_AGENT_FORCE="yes please": want true or false`}},
	} {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		getenv := func(name string) string { return c.env[name] }
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"--config", path, "--addr", "127.0.0.1:0"}, getenv, strings.NewReader(""), &out, &errOut)
		if err == nil || exitCode(err) != 2 {
			t.Errorf("%q %v: %v (exit %d), want exit 2", c.yaml, c.env, err, exitCode(err))
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q %v: %q does not say %q", c.yaml, c.env, err, w)
			}
		}
		if strings.Contains(err.Error(), "strconv.") || strings.Contains(out.String(), "listening") {
			t.Errorf("%q %v: %q, printed %q", c.yaml, c.env, err, out.String())
		}
	}
}
