package engine

import "hash/maphash"

// podIndexSeed seeds the hashes of pod names; the index's answers do not
// depend on it.
var podIndexSeed = maphash.MakeSeed()

// podIndex finds a pod of Input.Pods by name: an open-addressed hash table
// of pod indices. It holds no pointers and costs one allocation, where a
// map[string]int costs several and a pass of the garbage collector.
type podIndex struct {
	pods  []Pod
	slots []int32 // pod index + 1; 0 is an empty slot
	mask  uint64
}

// newPodIndex returns an empty index for pods; add inserts them.
func newPodIndex(pods []Pod) podIndex {
	size := 8
	for size < 2*len(pods) {
		size *= 2
	}
	return podIndex{pods: pods, slots: make([]int32, size), mask: uint64(size - 1)}
}

// add inserts pod i; it reports false, inserting nothing, when a pod of
// the same name is already in the index.
func (x *podIndex) add(i int) bool {
	name := x.pods[i].Name
	for h := maphash.String(podIndexSeed, name) & x.mask; ; h = (h + 1) & x.mask {
		s := x.slots[h]
		if s == 0 {
			x.slots[h] = int32(i + 1)
			return true
		}
		if x.pods[s-1].Name == name {
			return false
		}
	}
}

// find returns the index of the pod named name, or -1.
func (x *podIndex) find(name string) int {
	if len(x.slots) == 0 {
		return -1
	}
	for h := maphash.String(podIndexSeed, name) & x.mask; ; h = (h + 1) & x.mask {
		s := x.slots[h]
		if s == 0 {
			return -1
		}
		if x.pods[s-1].Name == name {
			return int(s - 1)
		}
	}
}
