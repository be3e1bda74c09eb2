// Package console drives the web console in a real headless Chromium
// (Debian's chromium package) against a real setpoint server: a bbolt file,
// gRPC over TCP, the console's HTTP handler (in plaintext, and over TLS with
// HTTP/2 for one page), principals with bearer tokens.
// One browser runs for the whole test; each check opens its own tab, and
// the tabs run in parallel.
//
// Outside CI a machine without chromium skips the test (install it with
// `make chromium`); in CI (CI=true) a missing chromium fails it.
// Screenshots are written to the test's artifact directory (go test
// -artifacts) and, with SETPOINT_SCREENSHOTS=DIR, to DIR too (docs/ keeps
// a few).
package console
