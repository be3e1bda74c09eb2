package schedule_test

import (
	"fmt"
	"time"

	"github.com/setpointhq/setpoint/schedule"
)

// A business-hours floor in Berlin, on the Monday after the clocks went
// forward: 08:00 CEST is 06:00 UTC.
func Example() {
	s, err := schedule.Compile([]schedule.Window{{
		Name: "business-hours", TimeZone: "Europe/Berlin",
		Start: "0 8 * * 1-5", End: "0 18 * * 1-5", MinReplicas: 10,
	}})
	if err != nil {
		panic(err)
	}
	for _, at := range []string{"05:59", "06:00", "15:59", "16:00"} {
		now, _ := time.Parse("2006-01-02 15:04", "2026-03-30 "+at)
		for _, p := range s.Proposals(now) {
			fmt.Printf("%s UTC: %s proposes %d (%s)\n", at, p.Name, p.Replicas, p.Explanation)
		}
		if len(s.Proposals(now)) == 0 {
			fmt.Printf("%s UTC: closed\n", at)
		}
	}
	// Output:
	// 05:59 UTC: closed
	// 06:00 UTC: schedule business-hours proposes 10 (window open since 2026-03-30 08:00 CEST, until 2026-03-30 18:00 CEST (Europe/Berlin): at least 10 replicas)
	// 15:59 UTC: schedule business-hours proposes 10 (window open since 2026-03-30 08:00 CEST, until 2026-03-30 18:00 CEST (Europe/Berlin): at least 10 replicas)
	// 16:00 UTC: closed
}
