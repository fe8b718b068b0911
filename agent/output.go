package agent

import (
	"os"
	"sync/atomic"
	"time"
)

// maxPipe bounds what a pipe holds: more read after the agent stopped was
// written after it stopped, by a process outside its group.
const maxPipe = 1 << 20

// output is the agent's stdout as the run reads it, with how much its reads
// returned and how long they waited for data.
type output struct {
	*os.File
	read    atomic.Int64 // bytes returned
	waited  atomic.Int64 // nanoseconds spent in finished reads
	pending atomic.Int64 // when the read under way began (UnixNano), 0 when none
}

func (o *output) Read(b []byte) (int, error) {
	start := time.Now()
	o.pending.Store(start.UnixNano())
	n, err := o.File.Read(b)
	o.pending.Store(0)
	o.waited.Add(int64(time.Since(start)))
	o.read.Add(int64(n))
	return n, err
}

// progress returns the bytes read so far and the time reads have waited,
// the read under way included.
func (o *output) progress(now time.Time) (read int64, waited time.Duration) {
	w := o.waited.Load()
	if p := o.pending.Load(); p != 0 {
		w += now.UnixNano() - p
	}
	return o.read.Load(), time.Duration(w)
}
