package simulator

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFlagErrors(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		stderr string
	}{
		{"unknown long", []string{"-p", "--bogus", "hi"}, nil, "error: unknown option '--bogus'"},
		{"unknown short", []string{"-x", "hi"}, nil, "error: unknown option '-x'"},
		{"unknown combined", []string{"-pz", "hi"}, nil, "error: unknown option '-pz'"},
		{"bad model", []string{"-p", "--model", "no-such-model", "hi"}, nil, "Cannot use this model: no-such-model. Available models: auto, sim-fast, sim-smart"},
		{"bad resume", []string{"-p", "--resume", "../etc", "hi"}, nil, "../etc"},
		{"resume with newline", []string{"-p", "--resume=a\nb", "hi"}, nil, "chat id"},
		{"empty resume", []string{"-p", "--resume=", "hi"}, nil, "chat id"},
		{"long resume", []string{"-p", "--resume=" + strings.Repeat("a", 129), "hi"}, nil, "chat id"},
		{"bad mode", []string{"--mode", "agent", "hi"}, nil, "Allowed choices are plan, ask, debug"},
		{"bad format", []string{"--output-format", "xml", "hi"}, nil, "Allowed choices are text, json, stream-json"},
		{"missing value", []string{"-p", "--model"}, nil, "argument missing"},
		{"bad header", []string{"-H", "no-colon", "hi"}, nil, "Invalid header"},
		{"bad speed flag", []string{"--sim-speed=-1", "hi"}, nil, "invalid simulator speed"},
		{"bad speed env", []string{"hi"}, map[string]string{SpeedEnv: "fast"}, "invalid simulator speed"},
		{"missing workspace", []string{"--workspace", "/nonexistent/sim/dir", "hi"}, nil, "Workspace directory does not exist"},
		{"value on bool", []string{"--force=yes", "hi"}, nil, "does not take a value"},
		{"no prompt", []string{"-p"}, nil, "No prompt provided"},
		{"unknown scenario env", []string{"hi"}, map[string]string{ScenarioEnv: "nope"}, "unknown scenario"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := runSim(t, tc.args, runConfig{env: tc.env, stdin: strings.NewReader("")})
			if res.code != 1 {
				t.Fatalf("exit %d, want 1", res.code)
			}
			if res.stdout != "" {
				t.Fatalf("stdout = %q, want empty", res.stdout)
			}
			if !strings.Contains(res.stderr, tc.stderr) {
				t.Fatalf("stderr %q lacks %q", res.stderr, tc.stderr)
			}
		})
	}
}

func TestInfoCommands(t *testing.T) {
	const list = "Available models\n\nauto - Auto (current, default)\nsim-fast - Simulator Fast\nsim-smart - Simulator Smart\n"
	for _, args := range [][]string{{"models"}, {"--list-models"}, {"-p", "--list-models", "--trust"}} {
		res := runSim(t, args, runConfig{})
		if res.code != 0 || res.stdout != list {
			t.Fatalf("%v: exit %d, stdout %q", args, res.code, res.stdout)
		}
	}
	res := runSim(t, []string{"--help"}, runConfig{})
	if res.code != 0 {
		t.Fatalf("--help exit %d", res.code)
	}
	for _, want := range []string{"--mode <mode>", "(plan, ask, debug)", "--stream-partial-output", "--resume", "--workspace",
		"--force", "--trust", "--approve-mcps", "--header", "--output-format", "--model", "--sim-speed", "simulator"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	res = runSim(t, []string{"--version"}, runConfig{})
	if res.code != 0 || !strings.Contains(res.stdout, "simulator") {
		t.Fatalf("--version: exit %d, %q", res.code, res.stdout)
	}
	// After `--`, flag-like words are the prompt.
	res = runSim(t, []string{"-p", "--output-format", "stream-json", "--", "--help", "models"}, runConfig{})
	evs := decode(t, res.stdout)
	if res.code != 0 || evs[1].text() != "--help models" {
		t.Fatalf("prompt after -- = %q (exit %d)", evs[1].text(), res.code)
	}
}

func TestFlagForms(t *testing.T) {
	args := []string{"--sim-speed", "0", "-pf", "--output-format=stream-json", "--model=sim-smart", "--mode=ask",
		"--resume=Sess_42-x", "--approve-mcps", "-H", "X-Trace: 1", "--header=X-Other: 2", "--workspace=/tmp",
		"--sandbox", "disabled", "--show-thinking", "echo", "positional"}
	res := runSim(t, args, runConfig{})
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	evs := decode(t, res.stdout)
	init := evs[0]
	if init["session_id"] != "Sess_42-x" || init["model"] != "Simulator Smart" || init["permissionMode"] != "bypassPermissions" || init["cwd"] != "/tmp" {
		t.Fatalf("init = %v", init)
	}
	if evs[1].text() != "echo positional" {
		t.Fatalf("prompt = %q", evs[1].text())
	}

	res = runSim(t, []string{"--output-format", "json", "hello"}, runConfig{})
	if evs := decode(t, res.stdout); len(evs) != 1 || evs[0].typ() != "result" {
		t.Fatalf("json output = %q", res.stdout)
	}
	res = runSim(t, []string{"-p", "hello"}, runConfig{})
	if !strings.HasPrefix(res.stdout, "You asked:") {
		t.Fatalf("text output = %q", res.stdout)
	}
	res = runSim(t, []string{"-p", "hello"}, runConfig{env: map[string]string{"CURSOR_API_KEY": "k", SpeedEnv: "0"}})
	_ = res
	res = runSim(t, []string{"-p", "--output-format", "stream-json", "hi"}, runConfig{env: map[string]string{"CURSOR_API_KEY": "k"}})
	if evs := decode(t, res.stdout); evs[0]["apiKeySource"] != "env" {
		t.Fatalf("apiKeySource = %v", evs[0]["apiKeySource"])
	}
	res = runSim(t, []string{"-p", "--output-format", "stream-json", "hi"}, runConfig{env: map[string]string{ScenarioEnv: "fault:no-result"}})
	if strings.Contains(res.stdout, `"type":"result"`) {
		t.Fatal("DOCSTREAM_SIM_SCENARIO was not honoured")
	}
}

// simCommand runs the test binary as the simulator in a real process.
func simCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", SpeedEnv+"=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd
}

// startAndWaitForOutput starts cmd and returns once it has written its first
// stdout line, and a channel that receives cmd.Wait's error.
func startAndWaitForOutput(t *testing.T, cmd *exec.Cmd) <-chan error {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		once := false
		for {
			n, err := out.Read(buf)
			if n > 0 && !once {
				once = true
				close(first)
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("no output from the simulator process")
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return done
}

func TestProcessSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Run("SIGTERM exits 143", func(t *testing.T) {
		t.Parallel()
		cmd := simCommand(t, "-p", "--output-format", "stream-json", "--", "fault:hang-mid")
		done := startAndWaitForOutput(t, cmd)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err := waitDone(t, done)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 143 {
			t.Fatalf("wait = %v, want exit 143", err)
		}
	})
	t.Run("ignore-term needs SIGKILL", func(t *testing.T) {
		t.Parallel()
		cmd := simCommand(t, "-p", "--output-format", "stream-json", "--", "fault:ignore-term")
		done := startAndWaitForOutput(t, cmd)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			t.Fatalf("exited after SIGTERM: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		_ = cmd.Process.Kill()
		err := waitDone(t, done)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("wait = %v, want SIGKILL", err)
		}
	})
	t.Run("exit-signal dies of SIGKILL", func(t *testing.T) {
		t.Parallel()
		cmd := simCommand(t, "-p", "--output-format", "stream-json", "--", "fault:exit-signal")
		done := startAndWaitForOutput(t, cmd)
		err := waitDone(t, done)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("wait = %v, want death by SIGKILL", err)
		}
	})
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatal("the simulator process did not exit")
		return nil
	}
}
