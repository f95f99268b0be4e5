package libchain

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"syscall"

	"github.com/containernetworking/cni/pkg/types"
)

// NewLogger returns the logger for one invocation: JSON lines appended to
// conf.LogFile if set (0600, never through a symlink), else text on stderr.
// It never writes to stdout, which carries only the CNI result or error.
// The level is conf.LogLevel (debug, info, warn, error; default warn on
// stderr, info in a log file).
func NewLogger(conf *NetConf, stderr io.Writer) (*slog.Logger, func() error, error) {
	level := slog.LevelWarn
	if conf.LogFile != "" {
		level = slog.LevelInfo
	}
	if conf.LogLevel != "" {
		if err := level.UnmarshalText([]byte(strings.ToLower(conf.LogLevel))); err != nil {
			return nil, nil, configError("logLevel", fmt.Sprintf("%q: want debug, info, warn or error", conf.LogLevel))
		}
	}
	opts := &slog.HandlerOptions{Level: level}
	if conf.LogFile == "" {
		return slog.New(slog.NewTextHandler(stderr, opts)), func() error { return nil }, nil
	}
	f, err := os.OpenFile(conf.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, nil, cniError(types.ErrIOFailure, "opening logFile: %w", err)
	}
	return slog.New(slog.NewJSONHandler(f, opts)), f.Close, nil
}
