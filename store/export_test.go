package store

// Hooks into the package's internals for the tests of store_test.

// SetCopyWorkers sets how many records Copy writes at once and returns a
// function restoring the default.
func SetCopyWorkers(n int) (restore func()) {
	old := copyWorkers
	copyWorkers = n
	return func() { copyWorkers = old }
}
