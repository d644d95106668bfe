// SPDX-License-Identifier: Apache-2.0

// Package logging builds evictd's zap logger and routes client-go's klog
// output into it, so that one process writes one log stream in one format.
//
// Key conventions for callers (docs/run.md, "Log messages"): `pod` (namespace/name),
// `node`, `signal`, `reason`, `err`.
package logging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/go-logr/zapr"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// Formats are the accepted values of the log format flag; the first is the default.
var Formats = []string{"json", "console"}

// Levels are the accepted values of the log level flag.
var Levels = []string{"debug", "info", "warn", "error"}

// DefaultFormat and DefaultLevel are used when the flag value is empty.
const (
	DefaultFormat = "json"
	DefaultLevel  = "info"
)

// ErrorKey is the field name under which errors are logged, zap's own
// zap.Error included when callers use logging.Err.
const ErrorKey = "err"

// Flag names registered by AddFlags.
const (
	FlagFormat = "log-format"
	FlagLevel  = "log-level"
)

// AddFlags registers --log-format and --log-level on fs, defaulting to
// DefaultFormat and DefaultLevel; pass the values to New, which checks them.
func AddFlags(fs *pflag.FlagSet, format, level *string) {
	fs.StringVar(format, FlagFormat, DefaultFormat, "Log format: "+strings.Join(Formats, " or ")+".")
	fs.StringVar(level, FlagLevel, DefaultLevel, "Log level: "+strings.Join(Levels, ", ")+".")
}

// New returns a logger writing to stderr. format is "json" (the default,
// for log pipelines) or "console" (for people at a terminal); level is one of
// Levels. An empty value takes the default. A bad value gives an error that
// names it and lists what is accepted.
func New(format, level string) (*zap.Logger, error) {
	return NewTo(os.Stderr, format, level)
}

// NewTo is New writing to w; tests and tools that capture logs use it.
func NewTo(w io.Writer, format, level string) (*zap.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	enc, err := newEncoder(format)
	if err != nil {
		return nil, err
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl)
	// No sampling: every eviction decision must reach the log, and evictd
	// logs little enough that sampling would only hide the lines that matter.
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(w)))), nil
}

// ParseLevel turns a level flag value into a zap level.
func ParseLevel(level string) (zapcore.Level, error) {
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "":
		return zapcore.InfoLevel, nil
	case "debug":
		return zapcore.DebugLevel, nil
	case "info":
		return zapcore.InfoLevel, nil
	case "warn", "warning":
		return zapcore.WarnLevel, nil
	case "error":
		return zapcore.ErrorLevel, nil
	}
	return zapcore.InfoLevel, fmt.Errorf("invalid log level %q (want one of: %s)", level, strings.Join(Levels, ", "))
}

func newEncoder(format string) (zapcore.Encoder, error) {
	cfg := zapcore.EncoderConfig{
		TimeKey:        "ts",
		LevelKey:       "level",
		NameKey:        "logger",
		CallerKey:      "caller",
		MessageKey:     "msg",
		StacktraceKey:  "stacktrace",
		LineEnding:     zapcore.DefaultLineEnding,
		EncodeTime:     zapcore.RFC3339NanoTimeEncoder,
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
	}
	switch strings.ToLower(strings.TrimSpace(format)) {
	case "", "json":
		cfg.EncodeLevel = zapcore.LowercaseLevelEncoder
		return zapcore.NewJSONEncoder(cfg), nil
	case "console":
		cfg.EncodeLevel = zapcore.CapitalLevelEncoder
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		return zapcore.NewConsoleEncoder(cfg), nil
	}
	return nil, fmt.Errorf("invalid log format %q (want one of: %s)", format, strings.Join(Formats, ", "))
}

// Err is zap.Error under evictd's error key ("err" rather than zap's "error").
func Err(err error) zap.Field {
	return zap.NamedError(ErrorKey, err)
}

// RouteKlog sends everything client-go logs through klog (reflector and
// leader-election messages, event broadcaster errors, ...) to logger, under
// the name "klog". klog's own -v verbosity still decides which V(n) lines are
// produced; with klog's default of 0 only its Info, Warning and Error lines
// arrive. It replaces klog's process-wide logger, so main calls it once; the
// returned function restores klog's default output (tests use it).
//
// Lines whose error is a cancelled context are dropped: evictd cancels its
// own requests when it stops, and client-go logs each one as an error
// ("Unexpected error when reading response body: context canceled"), which
// would read as a failure in a clean shutdown.
func RouteKlog(logger *zap.Logger) (restore func()) {
	logger = logger.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return dropCanceled{c} }))
	l := zapr.NewLoggerWithOptions(logger.Named("klog"), zapr.ErrorKey(ErrorKey))
	klog.SetLoggerWithOptions(l, klog.ContextualLogger(true))
	return func() {
		klog.Flush()
		klog.ClearLogger()
	}
}

// dropCanceled is a core that drops entries carrying a context.Canceled error.
type dropCanceled struct{ zapcore.Core }

func (d dropCanceled) With(fields []zapcore.Field) zapcore.Core {
	return dropCanceled{d.Core.With(fields)}
}

func (d dropCanceled) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if d.Enabled(e.Level) {
		return ce.AddCore(e, d)
	}
	return ce
}

func (d dropCanceled) Write(e zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if err, ok := f.Interface.(error); ok && errors.Is(err, context.Canceled) {
			return nil
		}
	}
	return d.Core.Write(e, fields)
}
