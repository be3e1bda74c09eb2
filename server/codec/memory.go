package codec

import (
	"sync"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// decodeMemory is the memory the hand decoder takes the per-pod parts of a
// RecommendRequest from: its pods, containers, pod metrics, their
// timestamps, durations and resource maps, and the arrays of the lists
// that hold them.
//
// The server decodes each Recommend into memory taken from decodeMemories
// and gives it back when the call is over (Request, RejectUndecodable):
// after a few calls a request of the usual shape needs no allocation for
// these parts, which were most of the objects a durable Recommend left to
// the garbage collector (BenchmarkDecodeRecommend, 10 pods: 2.0 KB in 163
// allocations per request instead of Codec's 24.3 KB in 337). Lifetime: the memory belongs to one request from
// its decoding to the end of its call's interceptor chain. Nothing may keep
// a pointer into the request's per-pod parts past that: the handlers
// convert the request into the engine's types (strings are shared, never
// reused), and the interceptors read it only during the call.
// TestDecodeMemoryReuse checks that a released request's memory is cleared
// and reused; TestRecommendReusesDecodeMemory that concurrent Recommends
// of many shapes still get the decisions their requests alone make.
//
// fresh is the memory of a decoder that keeps nothing (Codec): every part
// is made new, as a decoder without arenas would.
type decodeMemory struct {
	fresh bool

	pods                  arena[setpointv1.Pod]
	podLists              arena[*setpointv1.Pod]
	containers            arena[setpointv1.Container]
	containerLists        arena[*setpointv1.Container]
	podMetrics            arena[setpointv1.PodMetrics]
	podMetricsLists       arena[*setpointv1.PodMetrics]
	containerMetrics      arena[setpointv1.ContainerMetrics]
	containerMetricsLists arena[*setpointv1.ContainerMetrics]
	readies               arena[setpointv1.PodReadyCondition]
	timestamps            arena[timestamppb.Timestamp]
	durations             arena[durationpb.Duration]

	// maps are the resource maps handed out since the last release; spare
	// are cleared ones ready to hand out.
	maps, spare []map[string]string
}

// fresh is the memory of Codec's decoder: nothing is kept, so it is
// shared (and never written).
var fresh = &decodeMemory{fresh: true}

// decodeMemories keeps the server's decodeMemory between calls.
var decodeMemories = sync.Pool{New: func() any { return new(decodeMemory) }}

// Bounds of what a decodeMemory keeps across release, so that a rare huge
// request does not pin its memory for the calls after it.
const (
	// maxArenaEntries is the most entries an arena keeps.
	maxArenaEntries = 1024
	// maxKeptMaps is the most resource maps kept.
	maxKeptMaps = 1024
	// maxKeptMapLen is the most entries a kept resource map had: a larger
	// map keeps its larger table.
	maxKeptMapLen = 8
)

// arena hands out zeroed values of one type from one array: its current
// block. Released, it clears the part handed out and keeps the block, or
// replaces it with one large enough for everything the last request took.
type arena[T any] struct {
	block []T // handed out: [:len]; free: [len:cap]
	taken int // values handed out since the last release, across blocks
}

// take returns n zeroed values from m's arena a (new ones when m is
// fresh), as a slice of capacity n: appending to it never reaches values
// handed out after it.
func take[T any](m *decodeMemory, a *arena[T], n int) []T {
	if m.fresh {
		return make([]T, n)
	}
	if cap(a.block)-len(a.block) < n {
		// Made to measure, as a decoder without arenas would; release
		// sizes the next block for the whole request.
		a.block = make([]T, 0, n)
	}
	l := len(a.block)
	a.block = a.block[:l+n]
	a.taken += n
	return a.block[l : l+n : l+n]
}

// release clears what a handed out and makes it ready for the next
// request.
func (a *arena[T]) release() {
	switch {
	case a.taken > maxArenaEntries:
		a.block = nil
	case a.taken > cap(a.block):
		// More than one block was needed: one is made for all of it (the
		// blocks handed out go with their request).
		a.block = make([]T, 0, a.taken)
	default:
		clear(a.block)
		a.block = a.block[:0]
	}
	a.taken = 0
}

// newMap returns an empty resource map.
func (m *decodeMemory) newMap() map[string]string {
	if m.fresh {
		return map[string]string{}
	}
	var r map[string]string
	if n := len(m.spare); n > 0 {
		r, m.spare = m.spare[n-1], m.spare[:n-1]
	} else {
		r = map[string]string{}
	}
	m.maps = append(m.maps, r)
	return r
}

// release clears the memory m handed out and puts m back in
// decodeMemories. The request decoded into it must not be used any more.
func (m *decodeMemory) release() {
	m.pods.release()
	m.podLists.release()
	m.containers.release()
	m.containerLists.release()
	m.podMetrics.release()
	m.podMetricsLists.release()
	m.containerMetrics.release()
	m.containerMetricsLists.release()
	m.readies.release()
	m.timestamps.release()
	m.durations.release()
	for _, r := range m.maps {
		if len(r) <= maxKeptMapLen && len(m.spare) < maxKeptMaps {
			clear(r)
			m.spare = append(m.spare, r)
		}
	}
	clear(m.maps)
	m.maps = m.maps[:0]
	if cap(m.maps) > maxKeptMaps {
		m.maps = nil
	}
	decodeMemories.Put(m)
}
