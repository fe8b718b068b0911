package deploy

import (
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// instruction is one Dockerfile instruction with its continuation lines
// joined, and the comment lines right above it.
type instruction struct {
	cmd      string // upper case: FROM, RUN, ...
	args     string
	line     int
	comments []string
}

// stage is one FROM block of the Dockerfile.
type stage struct {
	from  string
	name  string
	instr []instruction
}

type dockerfile struct {
	preamble []instruction // ARGs before the first FROM
	stages   []stage
}

func parseDockerfile(t *testing.T, path string) dockerfile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var df dockerfile
	var comments []string
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" {
			comments = nil
			continue
		}
		if strings.HasPrefix(line, "#") {
			comments = append(comments, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		start := i + 1
		full := line
		for strings.HasSuffix(full, "\\") && i+1 < len(lines) {
			i++
			next := strings.TrimSpace(lines[i])
			if strings.HasPrefix(next, "#") {
				continue
			}
			full = strings.TrimSuffix(full, "\\") + " " + next
		}
		cmd, args, _ := strings.Cut(full, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start, comments: comments}
		comments = nil
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			df.stages = append(df.stages, st)
		}
		if len(df.stages) == 0 {
			df.preamble = append(df.preamble, in)
			continue
		}
		st := &df.stages[len(df.stages)-1]
		st.instr = append(st.instr, in)
	}
	return df
}

func (df dockerfile) stage(name string) *stage {
	for i := range df.stages {
		if df.stages[i].name == name {
			return &df.stages[i]
		}
	}
	return nil
}

func (s *stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.instr {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// shellWords splits a shell command line into words, honouring single and
// double quotes and backslash escapes, and keeps the operators && || ; | as
// words of their own. Enough for a Dockerfile RUN line; no expansions.
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated single quote in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			inWord = true
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated double quote in %q", s)
			}
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case c == '&' || c == '|' || c == ';':
			flush()
			op := string(c)
			if i+1 < len(s) && (s[i+1] == '&' || s[i+1] == '|') && c != ';' {
				op += string(s[i+1])
				i++
			}
			words = append(words, op)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	flush()
	return words, nil
}

// goBuild is the Dockerfile's go build command, split into its parts.
type goBuild struct {
	env    []string // VAR=value assignments in front of the command
	flags  []string // everything between "go build" and the package, without -o
	output string
	pkg    string
}

// dockerGoBuild finds the RUN instruction of the build stage that runs
// `go build` and parses it.
func dockerGoBuild(t *testing.T, df dockerfile) goBuild {
	t.Helper()
	build := df.stage("build")
	if build == nil {
		t.Fatal("Dockerfile: no stage named build")
	}
	var found []goBuild
	for _, in := range build.all("RUN") {
		words, err := shellWords(in.args)
		if err != nil {
			t.Fatalf("Dockerfile line %d: %v", in.line, err)
		}
		// Drop RUN's own flags (--mount=..., --network=...).
		for len(words) > 0 && strings.HasPrefix(words[0], "--") {
			words = words[1:]
		}
		// Split into simple commands at the shell operators.
		var cmds [][]string
		cur := []string{}
		for _, w := range words {
			if w == "&&" || w == "||" || w == ";" || w == "|" {
				cmds = append(cmds, cur)
				cur = []string{}
				continue
			}
			cur = append(cur, w)
		}
		cmds = append(cmds, cur)
		for _, c := range cmds {
			var gb goBuild
			k := 0
			for k < len(c) && strings.Contains(c[k], "=") && !strings.HasPrefix(c[k], "-") {
				gb.env = append(gb.env, c[k])
				k++
			}
			if len(c) < k+2 || c[k] != "go" || c[k+1] != "build" {
				continue
			}
			rest := c[k+2:]
			for j := 0; j < len(rest); j++ {
				switch {
				case rest[j] == "-o" && j+1 < len(rest):
					gb.output = rest[j+1]
					j++
				case strings.HasPrefix(rest[j], "-o="):
					gb.output = strings.TrimPrefix(rest[j], "-o=")
				case strings.HasPrefix(rest[j], "-"):
					gb.flags = append(gb.flags, rest[j])
				default:
					if gb.pkg != "" {
						t.Fatalf("Dockerfile line %d: more than one package in go build", in.line)
					}
					gb.pkg = rest[j]
				}
			}
			found = append(found, gb)
		}
	}
	if len(found) != 1 {
		t.Fatalf("Dockerfile: want exactly one go build command in the build stage, found %d", len(found))
	}
	return found[0]
}

var binary struct {
	once sync.Once
	dir  string
	path string
	out  string
	err  error
	took time.Duration
}

// docstreamBinary builds ./cmd/docstream exactly as the Dockerfile's build
// stage does (same environment assignments and flags, output into a temp
// dir) and returns the path. Built once per test run; the live metrics test
// uses the same binary, so it checks what the image ships.
func docstreamBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		gb := dockerGoBuild(t, parseDockerfile(t, "Dockerfile"))
		binary.dir, binary.err = os.MkdirTemp("", "docstream-deploy-test-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "docstream")
		args := append([]string{"build"}, gb.flags...)
		args = append(args, "-o", binary.path, gb.pkg)
		goTool, err := exec.LookPath("go")
		if err != nil {
			goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goTool, args...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), gb.env...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		binary.took = time.Since(start)
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = a
			if strings.ContainsAny(a, " \t") {
				quoted[i] = fmt.Sprintf("%q", a)
			}
		}
		binary.out = fmt.Sprintf("%s %s %s:\n%s", strings.Join(gb.env, " "), goTool, strings.Join(quoted, " "), out)
		binary.err = err
	})
	if binary.err != nil {
		t.Fatalf("building ./cmd/docstream as the Dockerfile does failed: %v\n%s", binary.err, binary.out)
	}
	return binary.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

// TestDockerfile checks the image's shape: stages, base images, user,
// entrypoint, default commands, volumes, port, health check, comments.
func TestDockerfile(t *testing.T) {
	df := parseDockerfile(t, "Dockerfile")

	var argDefault string
	for _, in := range df.preamble {
		if in.cmd == "ARG" && strings.HasPrefix(in.args, "INSTALL_CURSOR_AGENT=") {
			argDefault = strings.TrimPrefix(in.args, "INSTALL_CURSOR_AGENT=")
		}
	}
	if argDefault != "false" {
		t.Errorf("ARG INSTALL_CURSOR_AGENT before the first FROM should default to false, got %q", argDefault)
	}

	for _, st := range df.stages {
		if len(st.instr) == 0 || len(st.instr[0].comments) == 0 {
			t.Errorf("stage %q (FROM %s) has no comment above it", st.name, st.from)
		}
	}

	want := map[string]string{
		"build":       "golang:1.26-bookworm",
		"runtime":     "debian:bookworm-slim",
		"agent-false": "runtime",
		"agent-true":  "runtime",
		"final":       "agent-${INSTALL_CURSOR_AGENT}",
	}
	for name, from := range want {
		st := df.stage(name)
		if st == nil {
			t.Errorf("no stage %q", name)
			continue
		}
		if st.from != from {
			t.Errorf("stage %q: FROM %s, want FROM %s", name, st.from, from)
		}
	}
	if last := df.stages[len(df.stages)-1]; last.name != "final" {
		t.Errorf("the last stage is %q, want final (the image docker build produces)", last.name)
	}
	if t.Failed() {
		return
	}

	gb := dockerGoBuild(t, df)
	if !slices.Contains(gb.env, "CGO_ENABLED=0") || !slices.Contains(gb.flags, "-trimpath") ||
		!slices.Contains(gb.flags, "-ldflags=-s -w") || gb.output != "/out/docstream" || gb.pkg != "./cmd/docstream" {
		t.Errorf("go build line: env %v flags %v -o %s %s; want CGO_ENABLED=0 go build -trimpath -ldflags=\"-s -w\" -o /out/docstream ./cmd/docstream",
			gb.env, gb.flags, gb.output, gb.pkg)
	}

	rt := df.stage("runtime")
	entry := rt.all("ENTRYPOINT")
	if len(entry) != 1 || entry[0].args != `["/usr/bin/tini","--","/usr/local/bin/docstream"]` {
		t.Errorf("runtime ENTRYPOINT = %v, want tini as PID 1 running docstream", entry)
	}
	// An ENTRYPOINT after a stage's CMD, or in a later stage, resets the
	// inherited CMD: ENTRYPOINT belongs to the base only, CMD to the variants.
	for _, st := range df.stages {
		if st.name != "runtime" && len(st.all("ENTRYPOINT")) > 0 {
			t.Errorf("stage %q sets ENTRYPOINT: that resets the CMD it inherits", st.name)
		}
		if st.name != "agent-false" && st.name != "agent-true" && len(st.all("CMD")) > 0 {
			t.Errorf("stage %q sets CMD; only the agent-* variants should", st.name)
		}
	}
	if got := rt.all("USER"); len(got) == 0 || got[len(got)-1].args != "10001:10001" {
		t.Errorf("runtime USER = %v, want 10001:10001", got)
	}
	if got := rt.all("WORKDIR"); len(got) != 1 || got[0].args != "/home/docstream" {
		t.Errorf("runtime WORKDIR = %v, want /home/docstream", got)
	}
	var installs string
	for _, in := range rt.all("RUN") {
		installs += in.args + "\n"
	}
	for _, pkg := range []string{"tini", "ca-certificates", "curl", "useradd --uid 10001"} {
		if !strings.Contains(installs, pkg) {
			t.Errorf("runtime stage does not install/create %q", pkg)
		}
	}

	demo := df.stage("agent-false").all("CMD")
	if len(demo) != 1 || demo[0].args != `["--demo","--addr","0.0.0.0:8080"]` {
		t.Errorf("agent-false CMD = %v, want [\"--demo\",\"--addr\",\"0.0.0.0:8080\"]", demo)
	}
	agentStage := df.stage("agent-true")
	if cmd := agentStage.all("CMD"); len(cmd) != 1 || strings.Contains(cmd[0].args, "--demo") {
		t.Errorf("agent-true CMD = %v, want one CMD without --demo", cmd)
	}
	var realRuns string
	for _, in := range agentStage.instr {
		if in.cmd == "USER" {
			realRuns += "USER " + in.args + "\n"
		}
		if in.cmd == "RUN" {
			realRuns += in.args + "\n"
		}
	}
	inst := strings.Index(realRuns, "curl https://cursor.com/install -fsS | bash")
	if inst < 0 {
		t.Errorf("agent-true does not run the official installer")
	} else if u := strings.LastIndex(realRuns[:inst], "USER "); u < 0 || !strings.HasPrefix(realRuns[u:], "USER 10001") {
		t.Errorf("the installer must run as the non-root user 10001")
	}

	final := df.stage("final")
	var vols, expose, health string
	for _, in := range final.instr {
		switch in.cmd {
		case "VOLUME":
			vols += in.args
		case "EXPOSE":
			expose += in.args
		case "HEALTHCHECK":
			health += in.args
		}
	}
	for _, v := range []string{`"/home/docstream/data"`, `"/home/docstream/.cursor"`} {
		if !strings.Contains(vols, v) {
			t.Errorf("final stage: no VOLUME %s", v)
		}
	}
	if expose != "8080" {
		t.Errorf("EXPOSE = %q, want 8080", expose)
	}
	if !strings.Contains(health, "http://127.0.0.1:8080/healthz") {
		t.Errorf("HEALTHCHECK = %q, want a probe of /healthz", health)
	}

	// Every COPY from the build context names something that exists.
	for _, st := range df.stages {
		for _, in := range st.all("COPY") {
			if strings.Contains(in.args, "--from=") {
				continue
			}
			f := strings.Fields(in.args)
			for _, src := range f[:len(f)-1] {
				if strings.HasPrefix(src, "--") {
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
					t.Errorf("Dockerfile line %d: COPY source %s: %v", in.line, src, err)
				}
			}
		}
	}
}

// TestDockerIgnore: the build context keeps what the build needs.
func TestDockerIgnore(t *testing.T) {
	data, err := os.ReadFile("Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			rules = append(rules, l)
		}
	}
	for _, must := range []string{"go.mod", "go.sum", "cmd", "gateway", "documents", "sse", "translate"} {
		for _, r := range rules {
			if r == must || r == must+"/" || r == "*" || r == "**" {
				t.Errorf("Dockerfile.dockerignore excludes %s, which the build needs", must)
			}
		}
	}
	if !slices.Contains(rules, "!deploy/docker") {
		t.Errorf("Dockerfile.dockerignore must keep deploy/docker (COPY deploy/docker/config.yaml)")
	}
	if !slices.Contains(rules, ".git") {
		t.Errorf("Dockerfile.dockerignore should exclude .git")
	}
}

// TestDockerBuildStaticBinary runs the Dockerfile's go build line and checks
// that the result is a static ELF that starts.
func TestDockerBuildStaticBinary(t *testing.T) {
	bin := docstreamBinary(t)
	t.Logf("built in %s", binary.took.Round(time.Millisecond))

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("not an ELF file: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary has a PT_INTERP program header: it is dynamically linked")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatalf("reading DT_NEEDED: %v", err)
	}
	if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v; want a static binary", libs)
	}
	if needed, _ := f.DynString(elf.DT_NEEDED); len(needed) > 0 {
		t.Errorf("DT_NEEDED entries: %v", needed)
	}
	if s := f.Section(".symtab"); s != nil {
		t.Errorf("the binary has a symbol table: -ldflags=\"-s -w\" did not apply")
	}

	// It starts: translate a one-line transcript.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "translate")
	cmd.Stdin = strings.NewReader(`{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"s"}` + "\n")
	cmd.Dir = t.TempDir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("docstream translate: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
}

// TestCompose checks deploy/compose.yaml: the three services, the build,
// and that every file it mounts exists.
func TestCompose(t *testing.T) {
	type service struct {
		Build *struct {
			Context    string            `yaml:"context"`
			Dockerfile string            `yaml:"dockerfile"`
			Args       map[string]string `yaml:"args"`
		} `yaml:"build"`
		Image           string            `yaml:"image"`
		Command         []string          `yaml:"command"`
		Environment     map[string]string `yaml:"environment"`
		Ports           []string          `yaml:"ports"`
		Volumes         []string          `yaml:"volumes"`
		DependsOn       []string          `yaml:"depends_on"`
		StopGracePeriod string            `yaml:"stop_grace_period"`
		Restart         string            `yaml:"restart"`
	}
	var compose struct {
		Name     string              `yaml:"name"`
		Services map[string]service  `yaml:"services"`
		Volumes  map[string]struct{} `yaml:"volumes"`
	}
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&compose); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, name := range []string{"docstream", "prometheus", "grafana"} {
		if _, ok := compose.Services[name]; !ok {
			t.Errorf("compose.yaml: no service %s", name)
		}
	}
	ds := compose.Services["docstream"]
	if ds.Build == nil || filepath.Clean(filepath.Join(ds.Build.Context, ds.Build.Dockerfile)) != filepath.Clean("../deploy/Dockerfile") {
		t.Errorf("docstream must build deploy/Dockerfile with the repository root as context")
	} else if ds.Build.Args["INSTALL_CURSOR_AGENT"] != "${INSTALL_CURSOR_AGENT:-false}" {
		t.Errorf("docstream build arg INSTALL_CURSOR_AGENT = %q, want default false", ds.Build.Args["INSTALL_CURSOR_AGENT"])
	}
	if !slices.ContainsFunc(ds.Ports, func(p string) bool { return strings.HasSuffix(p, ":8080") }) {
		t.Errorf("docstream publishes no port 8080: %v", ds.Ports)
	}
	for _, want := range []string{":/home/docstream/data", ":/home/docstream/.cursor"} {
		if !slices.ContainsFunc(ds.Volumes, func(v string) bool { return strings.HasSuffix(v, want) }) {
			t.Errorf("docstream has no volume for %s", strings.TrimPrefix(want, ":"))
		}
	}
	// The image's config drains for server.shutdown_timeout; the gateway
	// closes its HTTP server at most 10 s after that.
	if d, err := time.ParseDuration(ds.StopGracePeriod); err != nil || d <= 40*time.Second {
		t.Errorf("docstream stop_grace_period %q should exceed the 30 s drain plus 10 s", ds.StopGracePeriod)
	}
	for name, svc := range compose.Services {
		for _, v := range svc.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") || strings.HasPrefix(src, "/") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			} else if _, ok := compose.Volumes[src]; !ok {
				t.Errorf("service %s uses the volume %s, which is not declared", name, src)
			}
		}
		for _, dep := range svc.DependsOn {
			if _, ok := compose.Services[dep]; !ok {
				t.Errorf("service %s depends on unknown service %s", name, dep)
			}
		}
	}

	// Prometheus scrapes docstream:8080/metrics and loads the rules mounted
	// from prometheus/rules.yml.
	var prom struct {
		Global        map[string]string `yaml:"global"`
		RuleFiles     []string          `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	pdata, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	pdec := yaml.NewDecoder(bytes.NewReader(pdata))
	pdec.KnownFields(true)
	if err := pdec.Decode(&prom); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	scraped := false
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			if sc.JobName == "docstream" && slices.Contains(st.Targets, "docstream:8080") && (sc.MetricsPath == "" || sc.MetricsPath == "/metrics") {
				scraped = true
			}
		}
	}
	if !scraped {
		t.Errorf("prometheus.yml: no job docstream scraping docstream:8080/metrics")
	}
	mounts := map[string]string{} // container path -> host path
	for _, v := range compose.Services["prometheus"].Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			mounts[parts[1]] = parts[0]
		}
	}
	for _, rf := range prom.RuleFiles {
		host, ok := mounts[rf]
		if !ok {
			t.Errorf("prometheus.yml loads %s, which compose does not mount", rf)
			continue
		}
		if filepath.Clean(host) != filepath.Clean("./prometheus/rules.yml") {
			t.Errorf("%s is mounted from %s, want ./prometheus/rules.yml", rf, host)
		}
	}
	if len(prom.RuleFiles) == 0 {
		t.Errorf("prometheus.yml loads no rule file")
	}

	// Grafana: the provider's path is where compose mounts the dashboards.
	var provider struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	gdata, err := os.ReadFile("grafana/provisioning/dashboards/docstream.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(gdata, &provider); err != nil {
		t.Fatal(err)
	}
	gmounts := map[string]string{}
	for _, v := range compose.Services["grafana"].Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			gmounts[parts[1]] = parts[0]
		}
	}
	if len(provider.Providers) != 1 || gmounts[provider.Providers[0].Options.Path] != "./grafana/dashboards" {
		t.Errorf("the dashboard provider's path is not where compose mounts ./grafana/dashboards")
	}
	if gmounts["/etc/grafana/provisioning"] != "./grafana/provisioning" {
		t.Errorf("compose does not mount ./grafana/provisioning at /etc/grafana/provisioning")
	}
}
