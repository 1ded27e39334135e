package config

import (
	"fmt"
	"io"
	"log/slog"
)

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("PAYREQ_LOG_LEVEL must be debug, info, warn or error")
	}
	return l, nil
}

// Logger is the structured JSON logger the configuration asks for.
func (c Config) Logger(w io.Writer) *slog.Logger {
	level, _ := parseLevel(c.LogLevel)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}
