package libchain

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"
)

// NewLogger returns the logger for one invocation: JSON lines appended to
// conf.LogFile if set (0600, never through a symlink), else text on stderr.
// It never writes to stdout, which carries only the CNI result or error.
// The level is conf.LogLevel (debug, info, warn, error; default warn on
// stderr, info in a log file).
//
// A logFile that cannot be used (a missing directory, a read-only
// filesystem, a symlink, anything but a regular file) fails nothing: the
// log goes to stderr, which says so once. DEL must never wedge on logging.
// The only error is a logLevel that does not parse.
func NewLogger(conf *NetConf, stderr io.Writer) (*slog.Logger, func() error, error) {
	var explicit *slog.Level
	if conf.LogLevel != "" {
		var l slog.Level
		if err := l.UnmarshalText([]byte(strings.ToLower(conf.LogLevel))); err != nil {
			return nil, nil, configError("logLevel", fmt.Sprintf("%q: want debug, info, warn or error", conf.LogLevel))
		}
		explicit = &l
	}
	levelOr := func(def slog.Level) *slog.HandlerOptions {
		if explicit != nil {
			return &slog.HandlerOptions{Level: *explicit}
		}
		return &slog.HandlerOptions{Level: def}
	}
	if conf.LogFile != "" {
		f, err := openLogFile(conf.LogFile)
		if err == nil {
			return slog.New(slog.NewJSONHandler(f, levelOr(slog.LevelInfo))), f.Close, nil
		}
		// Best effort: if stderr fails too, there is nowhere left to say so.
		_, _ = fmt.Fprintf(stderr, "catena: logFile %q is unusable, logging to stderr: %s\n", conf.LogFile, BoundText(err.Error()))
	}
	return slog.New(slog.NewTextHandler(stderr, levelOr(slog.LevelWarn))), func() error { return nil }, nil
}

// openLogFile opens path for appending: never through a symlink, never
// blocking (a FIFO without a reader would hang every verb), and only if it
// is a regular file.
func openLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w: a %s, not a regular file", path, errors.ErrUnsupported, fi.Mode().Type())
	}
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}
