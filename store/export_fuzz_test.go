package store

// Hooks for the fuzz tests of store_test: the record codec and the key
// parser, which read bytes from the file.
var (
	ParseRecordKey = parseRecordKey
)
