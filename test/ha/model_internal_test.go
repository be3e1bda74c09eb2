package ha

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// The model accepts the histories a correct service can give and rejects
// those of the failures the fault test looks for.
func TestModel(t *testing.T) {
	rec := func(p, desired int32, start, end int64) call {
		return call{in: input{kind: recommend, p: p}, out: output{desired: desired}, start: start, end: end, id: string(rune('a' + p))}
	}
	lost := func(p int32, start int64) call {
		return call{in: input{kind: recommend, p: p}, out: output{unknown: true}, start: start}
	}
	obs := func(p int32, refused bool, start, end int64) call {
		return call{in: input{kind: observe, p: p}, out: output{refused: refused}, start: start, end: end}
	}
	get := func(recs []int32, applied []int32, start, end int64) call {
		c := call{in: input{kind: read}, readRecs: recs, start: start, end: end}
		for _, p := range applied {
			c.readIDs = append(c.readIDs, string(rune('a'+p)))
		}
		return c
	}
	tests := []struct {
		name  string
		calls []call
		want  bool
	}{
		{"one after another", []call{rec(5, 5, 0, 1), rec(3, 5, 2, 3), obs(3, false, 4, 5), get([]int32{5, 3}, []int32{3}, 6, 7)}, true},
		{"concurrent, either order", []call{rec(5, 5, 0, 10), rec(3, 3, 1, 9), get([]int32{3, 5}, nil, 11, 12)}, true},
		{"a failed call that took effect", []call{lost(7, 0), rec(3, 7, 2, 3), get([]int32{7, 3}, nil, 4, 5)}, true},
		{"a failed call that did not", []call{lost(7, 0), rec(3, 3, 2, 3), get([]int32{3}, nil, 4, 5)}, true},
		{"Observe of a decision no longer last", []call{rec(5, 5, 0, 1), rec(3, 5, 2, 3), obs(5, true, 4, 5), get([]int32{5, 3}, nil, 6, 7)}, true},
		{"a read while a call is under way", []call{rec(5, 5, 0, 1), rec(3, 5, 2, 9), get([]int32{5}, nil, 3, 4), get([]int32{5, 3}, nil, 5, 6), get([]int32{5, 3}, nil, 10, 11)}, true},

		{"a lost acknowledged Recommend", []call{rec(5, 5, 0, 1), rec(3, 5, 2, 3), get([]int32{3}, nil, 4, 5)}, false},
		{"a lost update: decided without the one before", []call{rec(5, 5, 0, 1), rec(3, 3, 2, 3), get([]int32{5, 3}, nil, 4, 5)}, false},
		{"recorded against real-time order", []call{rec(5, 5, 0, 1), rec(3, 5, 2, 3), get([]int32{3, 5}, nil, 4, 5)}, false},
		{"recorded twice", []call{rec(5, 5, 0, 1), get([]int32{5, 5}, nil, 4, 5)}, false},
		{"a stale read", []call{rec(5, 5, 0, 1), get(nil, nil, 2, 3), get([]int32{5}, nil, 4, 5)}, false},
		{"reads going back", []call{rec(5, 5, 0, 9), get([]int32{5}, nil, 2, 3), get(nil, nil, 4, 5), get([]int32{5}, nil, 10, 11)}, false},
		{"a read of what was never written", []call{rec(5, 5, 0, 1), get([]int32{5, 4}, nil, 2, 3), get([]int32{5}, nil, 4, 5)}, false},
		{"Observe accepted for a decision no longer last", []call{rec(5, 5, 0, 1), rec(3, 5, 2, 3), obs(5, false, 4, 5), get([]int32{5, 3}, []int32{5}, 6, 7)}, false},
		{"Observe refused for the last decision", []call{rec(5, 5, 0, 1), obs(5, true, 2, 3), get([]int32{5}, nil, 4, 5)}, false},
		{"a lost acknowledged Observe", []call{rec(5, 5, 0, 1), obs(5, false, 2, 3), get([]int32{5}, nil, 4, 5)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proposalOf := map[string]int32{}
			for _, c := range tt.calls {
				if c.in.kind == recommend && c.id != "" {
					proposalOf[c.id] = c.in.p
				}
			}
			// The last call is the final read.
			ops, model, err := operations(tt.calls, tt.calls[len(tt.calls)-1], proposalOf)
			if err != nil {
				t.Fatal(err)
			}
			if got := porcupine.CheckOperations(model, ops); got != tt.want {
				t.Errorf("linearizable: %v, want %v", got, tt.want)
			}
		})
	}
}
