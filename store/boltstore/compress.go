package boltstore

import (
	"sync"

	"github.com/setpointhq/setpoint/store/record"
)

// compressors run record.Compress for Store.Update on goroutines of their
// own. S2's dictionary encoder keeps a 64 KiB hash table on its stack:
// called on an Update's goroutine — deep in gRPC's and the server's
// frames, and shrunk again by each garbage collection — every call grew
// that stack and copied all those frames (3–4% of the process's CPU at 64
// calls in flight). A compressor's stack is shallow, so growing it again
// after a collection copies next to nothing.
type compressors struct {
	jobs chan *compressJob // unbuffered: a job sent is a job taken
	done chan struct{}
	wg   sync.WaitGroup
}

// compressJob is one value to compress and, once ready, its result.
type compressJob struct {
	in, out []byte
	ready   chan struct{}
}

var compressJobs = sync.Pool{New: func() any { return &compressJob{ready: make(chan struct{}, 1)} }}

// startCompressors starts n compressors; stop ends them.
func startCompressors(n int) *compressors {
	c := &compressors{jobs: make(chan *compressJob), done: make(chan struct{})}
	for range n {
		c.wg.Go(func() {
			for {
				select {
				case j := <-c.jobs:
					j.out = record.Compress(j.in)
					j.ready <- struct{}{}
				case <-c.done:
					return
				}
			}
		})
	}
	return c
}

// compress returns record.Compress(b), computed by a compressor, or in the
// caller's goroutine once the compressors are stopped.
func (c *compressors) compress(b []byte) []byte {
	if len(b) < record.MinCompress {
		return b
	}
	j := compressJobs.Get().(*compressJob)
	j.in = b
	select {
	case c.jobs <- j:
		<-j.ready
	case <-c.done:
		j.out = record.Compress(b)
	}
	out := j.out
	j.in, j.out = nil, nil
	compressJobs.Put(j)
	return out
}

// stop ends the compressors; later calls of compress compress in place.
func (c *compressors) stop() {
	close(c.done)
	c.wg.Wait()
}
