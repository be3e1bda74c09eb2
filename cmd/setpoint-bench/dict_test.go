package main

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/klauspost/compress/dict"

	"github.com/setpointhq/setpoint/store/record"
)

var writeDict = flag.String("write-dict", "", "train the store's value dictionary on records of varied workloads and write it to this file (make dict)")

// TestWriteDictionary trains the S2 dictionary of the store's values
// (store/record/values2.dict was made so) on records this benchmark's workload leaves behind,
// in varied shapes: 2 to 50 pods, 1 to 3 metrics, several targets and load
// seeds. The -fill template (target 0, seed 2, 10 pods, 2 metrics) is not
// among them.
func TestWriteDictionary(t *testing.T) {
	if *writeDict == "" {
		t.Skip("run with -write-dict FILE (make dict)")
	}
	var samples [][]byte
	for _, pods := range []int{2, 5, 10, 20, 50} {
		for _, metrics := range []int{1, 2, 3} {
			for j := 1; j <= 12; j++ {
				cfg := Config{Clusters: 4, Pods: pods, Metrics: metrics}
				rec, err := seedRecordOf(context.Background(), cfg, j, uint64(100+j*pods*metrics))
				if err != nil {
					t.Fatal(err)
				}
				b, err := record.Marshal(&rec)
				if err != nil {
					t.Fatal(err)
				}
				samples = append(samples, b)
			}
		}
	}
	d, err := dict.BuildS2Dict(samples, dict.Options{MaxDictSize: 64 << 10, HashBytes: 6})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*writeDict, d, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d samples, dictionary of %d bytes written to %s", len(samples), len(d), *writeDict)
}
