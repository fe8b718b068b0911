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
	"syscall"
)

// Ready reports whether the agent binary can be run.
func (b *Backend) Ready() error {
	if b.binary == "" {
		return errors.New("no agent binary: set agent.binary or put `agent` or `cursor-agent` on PATH")
	}
	p := b.binary
	if !strings.Contains(p, "/") {
		lp, err := exec.LookPath(p)
		if err != nil {
			return fmt.Errorf("agent binary %q: %w", p, err)
		}
		p = lp
	}
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("agent binary %s is not executable", p)
	}
	if err := syscall.Access(p, 1); err != nil { // X_OK, for the gateway's own user
		return fmt.Errorf("agent binary %s cannot be run by this user: %w", p, err)
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
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("\x7fELF")) {
		return nil
	}
	line, ok := bytes.CutPrefix(head, []byte("#!"))
	if !ok {
		return fmt.Errorf("agent binary %s is neither a program nor a script whose first line is #!", script)
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	if bytes.HasSuffix(line, []byte("\r")) {
		return fmt.Errorf("agent binary %s: its #! line ends in CR (a Windows line ending): the interpreter's name includes it", script)
	}
	interp, rest, _ := strings.Cut(strings.TrimLeft(string(line), " \t"), " ")
	rest = strings.TrimSpace(rest)
	if interp == "" {
		return fmt.Errorf("agent binary %s: its #! line names no interpreter", script)
	}
	if st, err := os.Stat(interp); err == nil && st.IsDir() {
		return fmt.Errorf("agent binary %s: its interpreter %s is a directory", script, interp)
	}
	if err := syscall.Access(interp, 1); err != nil {
		return fmt.Errorf("agent binary %s: its interpreter %s cannot be run: %w", script, interp, err)
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
	for _, a := range args {
		if a == "" || strings.HasPrefix(a, "-") || strings.Contains(a, "=") {
			continue
		}
		if _, err := exec.LookPath(a); err != nil {
			return fmt.Errorf("agent binary %s: %q, which its #! line has env run, is not on PATH: %w", script, a, err)
		}
		return nil
	}
	return fmt.Errorf("agent binary %s: its #! line gives env no program to run", script)
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
