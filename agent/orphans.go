package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sweepLater has the next sweep kill what carries a finished agent's mark.
func (b *Backend) sweepLater(mark string, pgid, since int) {
	b.sweepMu.Lock()
	defer b.sweepMu.Unlock()
	if len(b.pending) == 0 {
		b.pending, b.sweepSince = map[string]int{}, since
	}
	b.pending[mark] = pgid
	b.sweepSince = min(b.sweepSince, since)
	if b.swept == nil {
		b.swept = make(chan struct{})
		go b.sweep()
	}
}

// sweep kills what the pending marks left, until none is pending.
func (b *Backend) sweep() {
	for {
		b.sweepMu.Lock()
		marks, since := b.pending, b.sweepSince
		b.pending = nil
		if len(marks) == 0 {
			close(b.swept)
			b.swept = nil
			b.sweepMu.Unlock()
			return
		}
		b.sweepMu.Unlock()
		killMarked(marks, since, b.runningAgent)
		for _, pgid := range marks {
			if b.PidDir != "" {
				_ = os.Remove(filepath.Join(b.PidDir, strconv.Itoa(pgid))) // the group's record
			}
		}
		time.Sleep(200 * time.Millisecond) // the least time between two sweeps of /proc
	}
}

// WaitSweeps returns once no sweep is pending or running.
func (b *Backend) WaitSweeps() {
	for {
		b.sweepMu.Lock()
		swept := b.swept
		b.sweepMu.Unlock()
		if swept == nil {
			return
		}
		<-swept
	}
}

// runningAgent reports whether a pid is an agent this backend runs now.
func (b *Backend) runningAgent(pid int) bool {
	_, ok := b.leaders.Load(pid)
	return ok
}

// Environment variables that mark an agent's processes, wherever they went,
// as those of one run, and of the gateways of one data directory.
const (
	groupMarkName = "AGENT_GATEWAY_GROUP"
	homeMarkName  = "AGENT_GATEWAY_HOME"
)

// HomeMark returns the home mark of the gateways of a data directory.
func HomeMark(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return hex.EncodeToString(sum[:12])
}

// recordGroup notes a running agent process group and its mark in pidDir,
// off the run's path, retrying a failed write while the agent runs.
func (b *Backend) recordGroup(pgid int, mark string) {
	if b.PidDir == "" {
		return
	}
	path, rec := filepath.Join(b.PidDir, strconv.Itoa(pgid)), []byte(b.binary+"\n"+mark)
	go func() {
		for wait := 100 * time.Millisecond; b.runningAgent(pgid); wait = min(2*wait, 5*time.Second) {
			err := os.WriteFile(path, rec, 0o600)
			if err == nil {
				if !b.runningAgent(pgid) {
					_ = os.Remove(path) // the run ended while this was written
				}
				return
			}
			b.metrics.AgentRecordFailures.Inc()
			b.Log.Warn().Err(err).Int("pgid", pgid).Msg("recording a running agent failed; retrying")
			time.Sleep(wait)
		}
	}()
}

// ReapOrphans ends what the agents of a crashed gateway left running, by
// their marks and pidDir's records, and returns how many groups it ended.
func ReapOrphans(pidDir, home string) int {
	marks := map[string]int{} // mark → pgid; the home mark's is -1
	if home != "" {
		marks[homeMarkName+"="+home] = -1
	}
	reaped := map[int]bool{}
	ents, _ := os.ReadDir(pidDir)
	for _, e := range ents {
		name := filepath.Join(pidDir, e.Name())
		pgid, err := strconv.Atoi(e.Name())
		rec, rerr := os.ReadFile(name)
		_ = os.Remove(name)
		if err != nil || rerr != nil || pgid <= 1 {
			continue
		}
		bin, mark, _ := strings.Cut(string(rec), "\n")
		if strings.HasPrefix(mark, groupMarkName+"=") {
			marks[mark] = pgid
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pgid))
		if err == nil && bin != "" && strings.HasPrefix(string(cmdline), bin) && syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			reaped[pgid] = true
		}
	}
	maps.Copy(reaped, killMarked(marks, 0, nil))
	delete(reaped, -1)
	return len(reaped)
}

// killMarked kills every process whose environment holds one of marks,
// except those skip reports and, unless pids wrapped around, those below
// since; it returns the marks' process groups that had one.
func killMarked(marks map[string]int, since int, skip func(pid int) bool) map[int]bool {
	killed := map[int]bool{}
	if len(marks) == 0 {
		return killed
	}
	last, _ := os.ReadFile("/proc/sys/kernel/ns_last_pid") // the pid the kernel gave last
	if n, _ := strconv.Atoi(strings.TrimSpace(string(last))); n < since {
		since = 0 // pids wrapped around, or the last one is unknown
	}
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range ents {
		name := e.Name()
		pid, err := strconv.Atoi(name) // an error: not a process
		if err != nil || pid <= 1 || pid < since || pid == self || (skip != nil && skip(pid)) {
			continue
		}
		env, err := os.ReadFile("/proc/" + name + "/environ")
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			if pgid, ok := marks[string(kv)]; ok {
				if pgid < 0 {
					pgid, _ = syscall.Getpgid(pid)
				}
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed[pgid] = true
				}
				break
			}
		}
	}
	return killed
}
