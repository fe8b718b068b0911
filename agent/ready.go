package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
)

// Ready reports whether the agent binary can be run.
func (b *Backend) Ready() error {
	if b.binary == "" {
		return errors.New("no agent binary: set agent.binary or put `agent` or `cursor-agent` on PATH")
	}
	p, err := exec.LookPath(b.binary) // a path is checked for this user's X_OK
	if err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	return interpreterReady(p)
}

// interpreterReady checks that the agent binary is a program (ELF) or a
// script whose #! interpreter, or env's program, can run.
func interpreterReady(script string) error {
	f, err := os.Open(script)
	if err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	defer f.Close()
	head, _ := io.ReadAll(io.LimitReader(f, 256))
	if bytes.HasPrefix(head, []byte("\x7fELF")) {
		return nil
	}
	line, ok := bytes.CutPrefix(head, []byte("#!"))
	if !ok {
		return fmt.Errorf("agent binary %s is neither a program nor a script whose first line is #!", script)
	}
	line, _, _ = bytes.Cut(line, []byte("\n"))
	if bytes.HasSuffix(line, []byte("\r")) {
		return fmt.Errorf("agent binary %s: its #! line ends in CR (a Windows line ending): the interpreter's name includes it", script)
	}
	interp, rest, _ := strings.Cut(strings.TrimLeft(string(line), " \t"), " ")
	rest = strings.TrimSpace(rest)
	if interp == "" {
		return fmt.Errorf("agent binary %s: its #! line names no interpreter", script)
	}
	if !strings.Contains(interp, "/") {
		interp = "./" + interp // the kernel does not search PATH for it
	}
	if _, err := exec.LookPath(interp); err != nil {
		return fmt.Errorf("agent binary %s: its interpreter cannot be run: %w", script, err)
	}
	if path.Base(interp) != "env" {
		return nil
	}
	// The kernel passes what follows the interpreter as one argument; env
	// splits it only after -S.
	args := []string{rest}
	if after, ok := strings.CutPrefix(rest, "-S"); ok {
		args = strings.Fields(after)
	}
	i := slices.IndexFunc(args, func(a string) bool { return a != "" && !strings.HasPrefix(a, "-") && !strings.Contains(a, "=") })
	if i < 0 {
		return fmt.Errorf("agent binary %s: its #! line gives env no program to run", script)
	}
	if _, err := exec.LookPath(args[i]); err != nil {
		return fmt.Errorf("agent binary %s: %q, which its #! line has env run, is not on PATH: %w", script, args[i], err)
	}
	return nil
}

// agentEnv is the agent's environment: the allowed and not denied names of
// the gateway's, the simulator's DOCSTREAM_SIM_* settings and CURSOR_API_KEY.
func agentEnv(environ []string, cfg Config) []string {
	var env []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "CURSOR_API_KEY" {
			continue
		}
		// The simulator's own settings are not secrets and always pass.
		if strings.HasPrefix(name, "DOCSTREAM_SIM_") || (matchAny(cfg.EnvAllow, name) && !matchAny(cfg.EnvDeny, name)) {
			env = append(env, kv)
		}
	}
	if cfg.APIKey != "" {
		env = append(env, "CURSOR_API_KEY="+cfg.APIKey)
	}
	slices.Sort(env)
	return env
}

func matchAny(patterns []string, name string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool {
		ok, _ := path.Match(strings.ToUpper(p), strings.ToUpper(name))
		return ok
	})
}
