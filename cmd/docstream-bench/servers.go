package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// buildGateway builds ./cmd/docstream into dir and returns the binary.
func buildGateway(dir string) (string, error) {
	bin := filepath.Join(dir, "docstream")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/docstream")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/docstream: %v\n%s", err, out.String())
	}
	return bin, nil
}

// server is a gateway or relay process on a loopback port.
type server struct {
	Name string
	URL  string
	cmd  *exec.Cmd
	log  *os.File
	// stdin stays open while the server runs: the relay exits when it closes.
	stdin io.WriteCloser
	done  chan struct{}
}

// agentSetup is what a server runs as its agent.
type agentSetup struct {
	Binary    string   // the agent binary, or inProcess
	Prefix    []string // e.g. agent-sim, --sim-speed=0.6
	Workspace string
}

// gatewayEnv is the real gateway's benchmark configuration for case c: the
// given agent, the SQLite store at storePath or else an in-memory one, auth
// and rate limits off, room for every stream, and the case's spawn rate.
// With c.Defaults only the agent and the rate limit are set.
func gatewayEnv(a agentSetup, c e2eCase, storePath string) []string {
	env := []string{
		"DOCSTREAM_AGENT_BINARY=" + a.Binary,
		"DOCSTREAM_AGENT_ARGS_PREFIX=" + strings.Join(a.Prefix, ","),
		"DOCSTREAM_AGENT_WORKSPACES=main=" + a.Workspace,
		"DOCSTREAM_AGENT_DEFAULT_WORKSPACE=main",
		// One client at a time: the per-client limit would hold it to
		// 120 requests a minute.
		"DOCSTREAM_AUTH_RATE_PER_MINUTE=0",
	}
	if !c.Defaults {
		lim := strconv.Itoa(max(c.Spec.Streams, 64) + 16)
		env = append(env,
			"DOCSTREAM_LIMITS_MAX_CONCURRENT_RUNS="+lim,
			"DOCSTREAM_LIMITS_QUEUE_SIZE="+lim,
			"DOCSTREAM_RUNS_DETACH_GRACE=0s",
			"DOCSTREAM_SERVER_SHUTDOWN_TIMEOUT=2s",
			"DOCSTREAM_AGENT_KILL_GRACE=1s",
			"DOCSTREAM_LOG_FORMAT=json",
		)
		if storePath != "" {
			env = append(env, "DOCSTREAM_STORE_DRIVER=sqlite", "DOCSTREAM_STORE_PATH="+storePath)
		} else {
			env = append(env, "DOCSTREAM_STORE_DRIVER=memory")
		}
		if sp := spawnRate(c); sp >= 0 {
			env = append(env, "DOCSTREAM_LIMITS_SPAWN_PER_SECOND="+strconv.FormatFloat(sp, 'f', -1, 64))
		}
	}
	return append(append(cleanEnv(), env...), c.Env...)
}

// cleanEnv is this process's environment without Docstream's settings and
// the agent's key.
func cleanEnv() []string {
	var keep []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DOCSTREAM_") && !strings.HasPrefix(kv, "CURSOR_API_KEY=") {
			keep = append(keep, kv)
		}
	}
	return keep
}

// startGateway starts a gateway for case c with agent a: the docstream
// binary bin, or, for the in-process agent, this program in -gateway-serve
// mode. A SQLite store, or with c.Defaults the working directory, is fresh,
// in dir.
func startGateway(bin, dir string, a agentSetup, c e2eCase) (*server, error) {
	storePath, wd := "", dir
	if c.SQLite || c.Defaults {
		sd, err := os.MkdirTemp(dir, "store-*")
		if err != nil {
			return nil, err
		}
		if c.SQLite {
			storePath = filepath.Join(sd, "docstream.db")
		}
		wd = sd // c.Defaults: the default store, ./data/docstream.db
	}
	var cmd *exec.Cmd
	if a.Binary == inProcess {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(self, "-gateway-serve", "-gateway-workspace", a.Workspace, "-gateway-streams", strconv.Itoa(c.Spec.Streams),
			"-gateway-spawn", strconv.FormatFloat(spawnRate(c), 'f', -1, 64), "-gateway-store", storePath)
		cmd.Env = cleanEnv()
	} else {
		cmd = exec.Command(bin, "--addr", "127.0.0.1:0")
		cmd.Env = gatewayEnv(a, c, storePath)
	}
	cmd.Dir = wd
	return startServer("docstream", cmd, dir, "docstream listening on ")
}

// startRelay starts this program in -relay-serve mode.
func startRelay(dir string, a agentSetup) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-relay-serve", "-relay-agent", a.Binary,
		"-relay-prefix", strings.Join(a.Prefix, ","), "-relay-workspace", a.Workspace)
	cmd.Dir = dir
	return startServer("relay", cmd, dir, "relay listening on ")
}

func startServer(name string, cmd *exec.Cmd, dir, banner string) (*server, error) {
	logf, err := os.CreateTemp(dir, name+"-*.log")
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	s := &server{Name: name, cmd: cmd, log: logf, stdin: stdin, done: make(chan struct{})}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), banner); ok {
				select {
				case urlc <- strings.TrimSpace(u):
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(s.done) }()
	select {
	case s.URL = <-urlc:
	case <-s.done:
		return nil, fmt.Errorf("%s exited at start; log: %s", name, tailFile(logf.Name()))
	case <-time.After(20 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("%s did not start within 20s", name)
	}
	for i := 0; i < 100; i++ {
		resp, err := http.Get(s.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("%s is not healthy", name)
}

// Pid is the server's process id.
func (s *server) Pid() int { return s.cmd.Process.Pid }

// Stop ends the server: SIGTERM, then SIGKILL to its group after 5s.
func (s *server) Stop() {
	if s == nil {
		return
	}
	_ = s.stdin.Close()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.log.Close()
}

func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// rssBytes reads VmRSS of a process from /proc/<pid>/status.
func rssBytes(pid int) (int64, error) { return statusBytes(pid, "VmRSS:") }

// statusBytes reads a size (VmRSS:, VmHWM:) from /proc/<pid>/status.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no " + field)
}

// cpuOf returns the user + system CPU time a process has used, from
// /proc/<pid>/stat (in clock ticks of 10 ms, Linux's fixed USER_HZ of 100).
// Children are not counted.
func cpuOf(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; fields count from the
	// last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bad /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("bad /proc stat")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad /proc stat")
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}
