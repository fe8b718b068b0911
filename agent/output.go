package agent

import (
	"os"
	"sync/atomic"
)

// maxPipe bounds what a pipe holds: more read after the agent stopped was
// written after it stopped, by a process outside its group.
const maxPipe = 1 << 20

// output is the agent's stdout as the run reads it, with how much its reads
// returned and whether one is under way.
type output struct {
	*os.File
	read    atomic.Int64 // bytes returned
	reading atomic.Bool
}

func (o *output) Read(b []byte) (int, error) {
	o.reading.Store(true)
	n, err := o.File.Read(b)
	o.reading.Store(false)
	o.read.Add(int64(n))
	return n, err
}
