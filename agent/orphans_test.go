package agent

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestKillMarked checks that a process carrying a run's mark is killed,
// one carrying another mark is not, and neither is a marked process that
// skip passes over.
func TestKillMarked(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	start := func(mark string) *exec.Cmd {
		cmd := exec.Command("sleep", "30")
		cmd.Env = append(os.Environ(), mark)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	mine, other, skipped := start(groupMarkName+"=mine-1"), start(groupMarkName+"=other-2"), start(groupMarkName+"=mine-1")
	skip := func(pid int) bool { return pid == skipped.Process.Pid }
	killed := killMarked(map[string]int{groupMarkName + "=mine-1": 4242}, mine.Process.Pid, skip)
	if !killed[4242] || len(killed) != 1 {
		t.Errorf("killed groups %v, want 4242", killed)
	}
	waitExit := func(cmd *exec.Cmd) bool {
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
			return true
		case <-time.After(2 * time.Second):
			return false
		}
	}
	if !waitExit(mine) {
		t.Fatalf("the marked process runs on")
	}
	if ws, ok := mine.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the marked process ended with %v, not SIGKILL", mine.ProcessState)
	}
	for name, cmd := range map[string]*exec.Cmd{"another run's": other, "the skipped": skipped} {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("%s process was killed: %v", name, err)
		}
	}
}

// TestSweepLater checks that the marks of runs ending together are swept,
// their processes killed and their groups forgotten, before waitSweeps
// returns, and that a running agent carrying a mark is passed over.
func TestSweepLater(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	b := &Backend{binary: "agent", PidDir: t.TempDir()}
	var cmds []*exec.Cmd
	for i := range 4 {
		cmd := exec.Command("sleep", "30")
		cmd.Env = append(os.Environ(), groupMarkName+"=sweep-"+string(rune('a'+i)))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		cmds = append(cmds, cmd)
	}
	// The last one is a running agent: its mark is not swept even when
	// pending (a pid given again to a new agent).
	b.leaders.Store(cmds[3].Process.Pid, true)
	for i, cmd := range cmds {
		b.recordGroup(9000+i, groupMarkName+"=sweep-"+string(rune('a'+i)))
		b.sweepLater(groupMarkName+"=sweep-"+string(rune('a'+i)), 9000+i, cmd.Process.Pid)
	}
	b.WaitSweeps()
	for i, cmd := range cmds[:3] {
		if err := cmd.Process.Signal(syscall.Signal(0)); err == nil {
			// Killed but not yet reaped shows as a zombie: wait for it.
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
				t.Errorf("marked process %d runs on", i)
			}
		}
	}
	if err := cmds[3].Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the running agent was killed: %v", err)
	}
	if ents, _ := os.ReadDir(b.PidDir); len(ents) != 0 {
		t.Errorf("%d groups not forgotten", len(ents))
	}
	if b.swept != nil || len(b.pending) != 0 {
		t.Errorf("sweeping %v with %d pending after waitSweeps", b.swept != nil, len(b.pending))
	}
}
