package etcdstore_test

import (
	"errors"
	"os"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }
