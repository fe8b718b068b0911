package simulator

import (
	"time"
)

// The tour works on an imaginary Python project in the workspace. Nothing is
// read from or written to disk.

const tourMainBefore = `"""Command line entry point for the greeter."""

import argparse
import sys

DEFAULT_NAME = "world"
GREETING = "Hello"


# greet prints a greeting for name.
# It returns the message so tests can check it.
def greet(name):
    message = f"{GREETING}, {name}!"
    print(message)
    return message


def main(argv=None):
    parser = argparse.ArgumentParser(description="Print a greeting.")
    parser.add_argument("name", nargs="?", default=DEFAULT_NAME)
    args = parser.parse_args(argv)
    greet(args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
`

const tourMainAfter = `"""Command line entry point for the greeter."""

import argparse
import sys

from config import DEFAULT_NAME, GREETING


# greet prints a greeting for name.
# It returns the message so tests can check it.
def greet(name):
    message = f"{GREETING}, {name}!"
    print(message)
    return message


def main(argv=None):
    parser = argparse.ArgumentParser(description="Print a greeting.")
    parser.add_argument("name", nargs="?", default=DEFAULT_NAME)
    args = parser.parse_args(argv)
    greet(args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
`

const tourConfig = `"""Settings shared by the greeter."""

DEFAULT_NAME = "world"
GREETING = "Hello"
`

const tourReadme = `# Greeter

A tiny command line program that prints a greeting.

    python src/main.py [name]
`

const tourReleaseNotes = `# Greeter releases

## 2.1.0

- Settings moved to ` + "`config.py`" + `.
- Python 3.9 is no longer supported.
`

var tourTree = lsDir{
	files: []string{"README.md", "pyproject.toml"},
	dirs: []lsDir{
		{rel: "scripts", files: []string{"old_greeter.py"}},
		{rel: "src", files: []string{"main.py"}},
		{rel: "tests", files: []string{"test_main.py"}},
	},
}

var tourTodos = []todo{
	{id: "config", content: "Move settings into src/config.py", status: "TODO_STATUS_PENDING"},
	{id: "cli", content: "Read the greeting from an environment variable", status: "TODO_STATUS_PENDING", deps: []string{"config"}},
	{id: "tests", content: "Cover the new variable with tests", status: "TODO_STATUS_PENDING", deps: []string{"cli"}},
	{id: "release", content: "Write the 2.2.0 release notes", status: "TODO_STATUS_PENDING", deps: []string{"cli", "tests"}},
}

const tourPlan = `# Configurable greeting

1. Move the settings into ` + "`src/config.py`" + ` (done in this run).
2. Let ` + "`GREETER_GREETING`" + ` override the greeting.
3. Test both the default and the override.
4. Write the release notes.
`

// playTour produces every document type in one run.
func playTour(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	type step func() error
	steps := []step{
		func() error {
			return r.think("The user wants a tour. I'll look around the workspace first, then read, edit, run and plan, so that every kind of output appears once.")
		},
		func() error {
			return r.say("I'll give you a tour of everything Docstream can render, starting with a look around the workspace.")
		},
		func() error {
			return r.tools(r.ls(tourTree, 120*time.Millisecond), r.glob("**/*.py", []string{"scripts/old_greeter.py", "src/main.py", "tests/test_main.py"}, 180*time.Millisecond))
		},
		func() error {
			return r.say("The entry point is `src/main.py`. Let me read it and find the greeting.")
		},
		func() error {
			return r.tools(r.readFile("src/main.py", tourMainBefore, 90*time.Millisecond),
				r.grep("def greet", []grepMatch{{"src/main.py", 12, "def greet(name):"}}, 150*time.Millisecond))
		},
		func() error {
			return r.think("greet is on lines 12 to 14. The constants belong in their own module.")
		},
		func() error {
			return r.say("This is the function that builds the greeting:\n\n" +
				"```12:14:src/main.py\ndef greet(name):\n    message = f\"{GREETING}, {name}!\"\n    print(message)\n```\n\n" +
				"I'll move the settings into their own module and import them.")
		},
		func() error { return r.tools(r.editCreate("src/config.py", tourConfig, 380*time.Millisecond)) },
		func() error {
			return r.tools(r.editModify("src/main.py", tourMainBefore, tourMainAfter,
				"from config import DEFAULT_NAME, GREETING\n", 350*time.Millisecond))
		},
		func() error {
			return r.say("`scripts/old_greeter.py` is no longer used, so I'll delete it.")
		},
		func() error { return r.tools(r.deleteFile("scripts/old_greeter.py", 212, 80*time.Millisecond)) },
		func() error { return r.say("Now let me run the program.") },
		func() error {
			return r.tools(r.shell(shellSpec{
				command: "python src/main.py Docstream", description: "Run the greeter",
				stdout: "Hello, Docstream!\n", duration: 640 * time.Millisecond,
			}))
		},
		func() error { return r.say("It works. I'll also clear the build directory.") },
		func() error {
			return r.tools(r.shell(shellSpec{
				command: "rm -rf build/", description: "Remove build output",
				rejected: true, duration: 60 * time.Millisecond,
			}))
		},
		func() error {
			return r.say("Removing files needs your approval, so I left `build/` alone. Next, the type checker and the linter, in parallel:")
		},
		func() error {
			return r.tools(
				r.shell(shellSpec{
					command: "mypy src", description: "Type-check the sources",
					stdout: "Success: no issues found in 2 source files\n", duration: 1400 * time.Millisecond,
				}),
				r.shell(shellSpec{
					command: "ruff check src", description: "Lint the sources",
					stdout: "All checks passed!\n", stderr: "warning: `ruff check` found a deprecated setting in pyproject.toml\n",
					duration: 500 * time.Millisecond,
				}),
			)
		},
		func() error {
			return r.say("Both passed. Let me check the project docs and the upstream release notes.")
		},
		func() error {
			return r.tools(
				mcp("docs", "search_docs", o("query", "greeting configuration"),
					"The greeting text is configured by GREETING in src/config.py (default \"Hello\").", 650*time.Millisecond),
				webFetch("https://example.com/greeter/releases", tourReleaseNotes, 420*time.Millisecond),
			)
		},
		func() error { return r.say("Here is the plan for the remaining work.") },
		func() error {
			return r.tools(createPlan("Configurable greeting",
				"Finish moving the settings, make the greeting configurable, test it and release it.",
				tourPlan, tourTodos, 200*time.Millisecond))
		},
		func() error {
			return r.tools(updateTodos([]todo{
				{id: "config", content: "Move settings into src/config.py", status: "TODO_STATUS_COMPLETED"},
				{id: "cli", content: "Read the greeting from an environment variable", status: "TODO_STATUS_IN_PROGRESS"},
			}, 60*time.Millisecond))
		},
		func() error { return r.say("One decision is yours to make:") },
		func() error {
			return r.tools(askQuestion("Greeting configuration", []question{{
				id: "q1", prompt: "Where should the greeting be configured?", options: [][2]string{
					{"env", "An environment variable (GREETER_GREETING)"},
					{"flag", "A command line flag (--greeting)"},
				},
			}}, 100*time.Millisecond))
		},
		func() error {
			return r.think("Summarize what changed, show the new module, and say how to run it.")
		},
		func() error {
			return r.say("## Summary\n\n" +
				"- Created `src/config.py` with the shared settings.\n" +
				"- `src/main.py` now imports them.\n" +
				"- Deleted the unused `scripts/old_greeter.py`.\n" +
				"- The program, the type checker and the linter all pass.\n\n" +
				"The new module:\n\n" +
				"```python\n" + tourConfig + "```\n\n" +
				"Run it with:\n\n" +
				"```bash\npython src/main.py Docstream\n```\n\n" +
				"Until you answer the question above I'll assume an **environment variable**.")
		},
	}
	for _, st := range steps {
		if err := st(); err != nil {
			return 0, err
		}
	}
	return 0, r.finish()
}
