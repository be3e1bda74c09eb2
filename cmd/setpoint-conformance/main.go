// Command setpoint-conformance replays HPA conformance scenarios through a
// real Setpoint server and reports how many behave exactly like the
// Kubernetes controller.
//
// Usage:
//
//	setpoint-conformance DIR|FILE...
//
// It starts a server on a loopback TCP port with a fresh store in a
// temporary directory and an injected clock, replays every scenario file
// (*.json) under the arguments, prints each failing scenario with its first
// differing step and field, and ends with "conformance: N passed, M
// failed". It exits 1 when a scenario failed or none was found, 2 on a
// usage or setup error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/setpointhq/setpoint/internal/conformance"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: setpoint-conformance DIR|FILE...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(flag.Args()))
}

func run(paths []string) int {
	dir, err := os.MkdirTemp("", "setpoint-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-conformance:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	h, err := conformance.Start(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-conformance:", err)
		return 2
	}
	res, err := conformance.Run(context.Background(), h.Client, h.Clock, os.Stdout, paths...)
	if serr := h.Stop(); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "setpoint-conformance:", err)
		return 2
	}
	if res.Failed > 0 || res.Passed == 0 {
		return 1
	}
	return 0
}
