package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/axsched/ax/services/internal/otlpsink"
)

// traceSink is the harness's OTLP collector for Config.Trace runs.
type traceSink struct {
	*otlpsink.Sink
	srv *http.Server
}

// startTraceSink serves a span-counting collector on a free loopback port
// and returns cfg with the started ax pointed at it.
func startTraceSink(cfg *Config) (*traceSink, *Config, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("trace collector: %w", err)
	}
	s := &traceSink{Sink: &otlpsink.Sink{}}
	s.srv = &http.Server{Handler: s.Sink, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	c := *cfg
	c.axArgs = append(slices.Clone(cfg.axArgs), "--otlp-endpoint", "http://"+ln.Addr().String())
	return s, &c, nil
}

func (s *traceSink) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
