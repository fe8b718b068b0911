package simulator

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$`)

// applyDiff applies a unified diff (as unifiedDiff writes it) to before.
func applyDiff(t *testing.T, before, diff string) string {
	t.Helper()
	old := splitLines(before)
	lines := strings.Split(diff, "\n")[2:]
	var out []string
	next := 0 // index in old of the first line not yet copied
	for i := 0; i < len(lines); {
		m := hunkHeader.FindStringSubmatch(lines[i])
		if m == nil {
			t.Fatalf("bad hunk header %q", lines[i])
		}
		start, _ := strconv.Atoi(m[1])
		if m[2] != "0" {
			start-- // 1-based, except for empty ranges
		}
		out = append(out, old[next:start]...)
		next = start
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			switch l[0] {
			case ' ':
				if old[next] != l[1:] {
					t.Fatalf("context %q does not match %q", l[1:], old[next])
				}
				out = append(out, l[1:])
				next++
			case '-':
				if old[next] != l[1:] {
					t.Fatalf("removed %q does not match %q", l[1:], old[next])
				}
				next++
			case '+':
				out = append(out, l[1:])
			}
		}
	}
	out = append(out, old[next:]...)
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

func TestUnifiedDiff(t *testing.T) {
	many := func(n int, change map[int]string) string {
		var sb strings.Builder
		for i := 1; i <= n; i++ {
			if c, ok := change[i]; ok {
				if c != "" {
					sb.WriteString(c + "\n")
				}
				continue
			}
			sb.WriteString("line " + strconv.Itoa(i) + "\n")
		}
		return sb.String()
	}
	cases := []struct{ before, after string }{
		{"", "a\nb\n"},
		{"a\nb\n", "a\nc\n"},
		{tourMainBefore, tourMainAfter},
		{many(40, nil), many(40, map[int]string{2: "two", 30: "thirty", 31: ""})},
		{many(20, nil), many(20, map[int]string{1: "", 20: "last"})},
		{many(10, nil), many(10, map[int]string{5: "five", 9: "nine"})},
	}
	for i, tc := range cases {
		d := unifiedDiff("/w/f.txt", tc.before, tc.after, tc.before == "")
		if got := applyDiff(t, tc.before, d); got != tc.after {
			t.Errorf("case %d: applying\n%s\ngives %q, want %q", i, d, got, tc.after)
		}
		if strings.HasSuffix(d, "\n") {
			t.Errorf("case %d: diff ends with a newline", i)
		}
	}
	if d := unifiedDiff("/w/f.txt", many(40, nil), many(40, map[int]string{2: "two", 30: "thirty"}), false); strings.Count(d, "\n@@ ") != 2 {
		t.Errorf("distant changes should give two hunks:\n%s", d)
	}
}
