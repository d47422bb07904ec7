package cli

import (
	"errors"
	"fmt"
)

// exitUsage is the exit code of a usage error (an unknown command or flag,
// a malformed flag value, a wrong number of arguments) and of -h, as Go's
// flag package and most Unix tools use it. A failed call exits 1.
const exitUsage = 2

// UsageError is a command line the CLI could not make sense of. Command is
// the command it was meant for ("drover job status"), so the message can
// say where to read the usage.
type UsageError struct {
	Command string
	Err     error
}

// Error is what was wrong, without the command.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the error that was wrong.
func (e *UsageError) Unwrap() error { return e.Err }

// usageErrorf returns a UsageError with a formatted message. Run fills in
// the command it was meant for.
func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// IsUsage reports whether err is a usage error.
func IsUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}

// asUsage marks err, found checking a command's flags or arguments, as a
// usage error.
func asUsage(err error) error {
	if err == nil || IsUsage(err) {
		return err
	}
	return &UsageError{Err: err}
}
