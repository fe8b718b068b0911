package simulator

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Version is what `--version` prints. It follows the CLI's `<date>-<build>`
// shape and says that this is the simulator.
const Version = "2026.10.03-simulator"

// SpeedEnv names the environment variable that sets the pacing factor
// (0 = no delays, 1 = realistic, 2 = twice as fast). `--sim-speed` overrides it.
const SpeedEnv = "DOCSTREAM_SIM_SPEED"

// LogEnv names the environment variable holding a file to which every start
// appends one JSON line: argv, prompt, cwd, environment names and pid.
const LogEnv = "DOCSTREAM_SIM_LOG"

// ScenarioEnv names the environment variable that picks a scenario by name
// (for example `tour` or `fault:crash`) whatever the prompt says.
const ScenarioEnv = "DOCSTREAM_SIM_SCENARIO"

// Model is one model the simulator accepts for `--model`.
type Model struct {
	// ID is the slug passed to --model.
	ID string
	// Name is the display name reported in system/init.
	Name string
}

var models = []Model{
	{ID: "auto", Name: "Auto"},
	{ID: "sim-fast", Name: "Simulator Fast"},
	{ID: "sim-smart", Name: "Simulator Smart"},
}

// Models returns the models the simulator lists and accepts; the first is the default.
func Models() []Model {
	return append([]Model(nil), models...)
}

func findModel(id string) (Model, bool) {
	for _, m := range models {
		if m.ID == id {
			return m, true
		}
	}
	return Model{}, false
}

// modelList renders the text of `models` / `--list-models`.
func modelList() string {
	var sb strings.Builder
	sb.WriteString("Available models\n\n")
	for i, m := range models {
		sb.WriteString(m.ID + " - " + m.Name)
		if i == 0 {
			sb.WriteString(" (current, default)")
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func modelIDs() string {
	ids := make([]string, len(models))
	for i, m := range models {
		ids[i] = m.ID
	}
	return strings.Join(ids, ", ")
}

const helpText = `Usage: agent [options] [command] [prompt...]

Docstream cursor-agent simulator. It speaks cursor-agent's command line and
writes scripted runs in the CLI's formats; it never contacts a model. The first
word of the prompt picks a scenario (tour, plan, ask, echo, tools, long:<n>,
bench:<n>, fault:<name>); any other prompt gets a short markdown reply.

Arguments:
  prompt                       Initial prompt for the agent

Options:
  -v, --version                Output the version number
  -p, --print                  Print responses to console (for scripts or non-interactive use)
  --output-format <format>     Output format (only works with --print): text, json or
                               stream-json (default: "text")
  --stream-partial-output      Stream partial output as individual text deltas (only works
                               with --print and stream-json format)
  --model <model>              Model to use (auto, sim-fast, sim-smart)
  --list-models                List available models and exit
  --mode <mode>                Start in the given execution mode (plan, ask, debug)
  --plan                       Start in plan mode (shorthand for --mode=plan)
  --resume <chatId>            Resume a chat session; the id may use A-Z a-z 0-9 _ -
  --workspace <path>           Workspace directory to use (default: current directory)
  -f, --force                  Force allow commands unless explicitly denied
  --yolo                       Alias for --force
  --trust                      Trust the current workspace without prompting
  --approve-mcps               Automatically approve all MCP servers
  -H, --header <header>        Add a custom header to agent requests ('Name: Value'; repeatable)
  --api-key <key>              API key for authentication (prefer CURSOR_API_KEY)
  --sandbox <mode>             Explicitly enable or disable the sandbox (enabled, disabled)
  --show-thinking              Accepted for compatibility; thinking is always streamed
  -h, --help                   Display help for command

Simulator options:
  --sim-speed <float>          Pacing factor: 0 = no delays, 1 = realistic (default),
                               2 = twice as fast. Also DOCSTREAM_SIM_SPEED.

Commands:
  models                       List available models
`

// config is the parsed command line.
type config struct {
	argv         []string
	speed        float64
	speedSet     bool
	print        bool
	outputFormat string
	partial      bool
	model        Model
	mode         string
	resume       string
	resumeSet    bool
	workspace    string
	force        bool
	trust        bool
	approveMCPs  bool
	headers      []string
	apiKeyFlag   bool
	help         bool
	version      bool
	listModels   bool
	promptArgs   []string // after `--`
	dashdash     bool
	positional   []string
}

// usageError is a command-line error: its text goes to stderr and the exit code is 1.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// validChatID reports whether id is 1 to 128 letters, digits, '_' and '-'.
func validChatID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// parseSpeed validates a --sim-speed or DOCSTREAM_SIM_SPEED value.
func parseSpeed(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("invalid simulator speed %q: want a number >= 0", s)
	}
	return v, nil
}

// parseArgs parses cursor-agent's command line plus the simulator's own
// --sim-speed. Options may come before or after positional words, as with the
// real CLI; everything after `--` is prompt text.
func parseArgs(args []string) (*config, error) {
	c := &config{
		argv:         append([]string{}, args...),
		speed:        1,
		outputFormat: "text",
		model:        models[0],
	}
	// value returns the option's value from `--name=value` or the next argument.
	i := 0
	value := func(arg, name, placeholder string) (string, error) {
		if v, ok := strings.CutPrefix(arg, name+"="); ok {
			return v, nil
		}
		if i+1 >= len(args) {
			return "", &usageError{fmt.Sprintf("error: option '%s %s' argument missing", name, placeholder)}
		}
		i++
		return args[i], nil
	}
	for ; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			c.dashdash = true
			c.promptArgs = append(c.promptArgs, args[i+1:]...)
			break
		}
		if arg == "-" || !strings.HasPrefix(arg, "-") {
			c.positional = append(c.positional, arg)
			continue
		}
		name := arg
		if strings.HasPrefix(arg, "--") {
			name, _, _ = strings.Cut(arg, "=")
		} else if len(arg) > 2 && !strings.Contains(arg, "=") {
			// Combined short boolean flags such as -pf.
			expanded, ok := expandShort(arg)
			if !ok {
				return nil, &usageError{fmt.Sprintf("error: unknown option '%s'", arg)}
			}
			args = append(args[:i:i], append(expanded, args[i+1:]...)...)
			i--
			continue
		}
		hasInline := strings.Contains(arg, "=") && strings.HasPrefix(arg, "--")
		switch name {
		case "-p", "--print":
			c.print = true
		case "--output-format":
			v, err := value(arg, name, "<format>")
			if err != nil {
				return nil, err
			}
			switch v {
			case "text", "json", "stream-json":
				c.outputFormat = v
			default:
				return nil, &usageError{fmt.Sprintf("error: option '--output-format <format>' argument '%s' is invalid. Allowed choices are text, json, stream-json.", v)}
			}
		case "--stream-partial-output":
			c.partial = true
		case "--model":
			v, err := value(arg, name, "<model>")
			if err != nil {
				return nil, err
			}
			m, ok := findModel(v)
			if !ok {
				return nil, &usageError{fmt.Sprintf("Cannot use this model: %s. Available models: %s", v, modelIDs())}
			}
			c.model = m
		case "--list-models":
			c.listModels = true
		case "--mode":
			v, err := value(arg, name, "<mode>")
			if err != nil {
				return nil, err
			}
			switch v {
			case "plan", "ask", "debug":
				c.mode = v
			default:
				return nil, &usageError{fmt.Sprintf("error: option '--mode <mode>' argument '%s' is invalid. Allowed choices are plan, ask, debug.", v)}
			}
		case "--plan":
			c.mode = "plan"
		case "--resume":
			v, err := value(arg, name, "<chatId>")
			if err != nil {
				return nil, err
			}
			if !validChatID(v) {
				return nil, &usageError{fmt.Sprintf("Error: Failed to resume chat %q: the chat id may only use the characters A-Z a-z 0-9 _ - (1 to 128 of them)", v)}
			}
			c.resume, c.resumeSet = v, true
		case "--workspace":
			v, err := value(arg, name, "<path>")
			if err != nil {
				return nil, err
			}
			if v == "" {
				return nil, &usageError{"error: option '--workspace <path>' argument missing"}
			}
			c.workspace = v
		case "-f", "--force", "--yolo":
			c.force = true
		case "--trust":
			c.trust = true
		case "--approve-mcps":
			c.approveMCPs = true
		case "-H", "--header":
			v, err := value(arg, name, "<header>")
			if err != nil {
				return nil, err
			}
			if n, _, ok := strings.Cut(v, ":"); !ok || strings.TrimSpace(n) == "" {
				return nil, &usageError{fmt.Sprintf("Error: Invalid header %q: expected 'Name: Value'", v)}
			}
			c.headers = append(c.headers, v)
		case "--api-key":
			if _, err := value(arg, name, "<key>"); err != nil {
				return nil, err
			}
			c.apiKeyFlag = true
		case "--sandbox":
			v, err := value(arg, name, "<mode>")
			if err != nil {
				return nil, err
			}
			if v != "enabled" && v != "disabled" {
				return nil, &usageError{fmt.Sprintf("error: option '--sandbox <mode>' argument '%s' is invalid. Allowed choices are enabled, disabled.", v)}
			}
		case "--show-thinking":
		case "-h", "--help":
			c.help = true
		case "-v", "--version":
			c.version = true
		case "--sim-speed":
			v, err := value(arg, name, "<float>")
			if err != nil {
				return nil, err
			}
			s, err := parseSpeed(v)
			if err != nil {
				return nil, &usageError{"error: " + err.Error()}
			}
			c.speed, c.speedSet = s, true
		default:
			return nil, &usageError{fmt.Sprintf("error: unknown option '%s'", arg)}
		}
		if hasInline && !takesValue(name) {
			return nil, &usageError{fmt.Sprintf("error: option '%s' does not take a value", name)}
		}
	}
	return c, nil
}

// takesValue reports whether the long option name expects a value.
func takesValue(name string) bool {
	switch name {
	case "--output-format", "--model", "--mode", "--resume", "--workspace", "--header",
		"--api-key", "--sandbox", "--sim-speed":
		return true
	}
	return false
}

// expandShort splits combined short boolean flags (-pf) into single ones.
func expandShort(arg string) ([]string, bool) {
	out := make([]string, 0, len(arg)-1)
	for _, r := range arg[1:] {
		switch r {
		case 'p', 'f', 'h', 'v':
			out = append(out, "-"+string(r))
		default:
			return nil, false
		}
	}
	return out, true
}
