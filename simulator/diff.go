package simulator

import (
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines kept around each change.
const diffContext = 3

// splitLines splits text into lines without their newlines. A trailing newline
// does not start an extra empty line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// editOp is one line of a line diff: ' ' kept, '-' removed, '+' added.
type editOp struct {
	kind byte
	text string
}

// lineDiff returns the edit script from a to b, computed from their longest
// common subsequence. It is meant for the small files of the scripted runs.
func lineDiff(a, b []string) []editOp {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	ops := make([]editOp, 0, n+m)
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			ops = append(ops, editOp{' ', a[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			ops = append(ops, editOp{'-', a[i]})
			i++
		default:
			ops = append(ops, editOp{'+', b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		ops = append(ops, editOp{'-', a[i]})
	}
	for ; j < m; j++ {
		ops = append(ops, editOp{'+', b[j]})
	}
	return ops
}

// diffStats counts the added and removed lines between before and after.
func diffStats(before, after string) (added, removed int) {
	for _, op := range lineDiff(splitLines(before), splitLines(after)) {
		switch op.kind {
		case '+':
			added++
		case '-':
			removed++
		}
	}
	return added, removed
}

// unifiedDiff renders the change from before to after as a unified diff with
// `--- a/<path>` / `+++ b/<path>` headers (`--- /dev/null` for a new file) and no
// trailing newline, the way the CLI's editToolCall reports diffString.
func unifiedDiff(path, before, after string, created bool) string {
	ops := lineDiff(splitLines(before), splitLines(after))
	var sb strings.Builder
	rel := strings.TrimPrefix(path, "/")
	if created {
		sb.WriteString("--- /dev/null\n")
	} else {
		sb.WriteString("--- a/" + rel + "\n")
	}
	sb.WriteString("+++ b/" + rel)

	// Positions (0-based) in a and b at the start of each op.
	type pos struct{ a, b int }
	at := make([]pos, len(ops)+1)
	for k, op := range ops {
		at[k+1] = at[k]
		if op.kind != '+' {
			at[k+1].a++
		}
		if op.kind != '-' {
			at[k+1].b++
		}
	}
	k := 0
	for k < len(ops) {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		// A hunk starts diffContext lines before the first change and runs until
		// more than 2*diffContext unchanged lines follow a change.
		start := max(k-diffContext, 0)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*diffContext {
				end = min(end+diffContext, len(ops))
				break
			}
			end = run
		}
		oldLen := at[end].a - at[start].a
		newLen := at[end].b - at[start].b
		fmt.Fprintf(&sb, "\n@@ -%s +%s @@", hunkRange(at[start].a, oldLen), hunkRange(at[start].b, newLen))
		for _, op := range ops[start:end] {
			sb.WriteByte('\n')
			sb.WriteByte(op.kind)
			sb.WriteString(op.text)
		}
		k = end
	}
	return sb.String()
}

// hunkRange formats one side of a hunk header. start is 0-based.
func hunkRange(start, length int) string {
	switch length {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	default:
		return fmt.Sprintf("%d,%d", start+1, length)
	}
}
