package filaotel

import (
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// DefaultPollInterval is how often an Observer reads queue stats.
const DefaultPollInterval = 15 * time.Second

type config struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	prop     propagation.TextMapPropagator
	interval time.Duration
	log      *slog.Logger
}

// Option configures an Instrumentation or an Observer.
type Option func(*config)

// WithTracerProvider sets the tracer provider; default the global one
// (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	}
}

// WithMeterProvider sets the meter provider; default the global one
// (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	}
}

// WithPropagator sets the propagator that writes trace context into message
// headers and reads it back; default the global one
// (otel.GetTextMapPropagator), which is a no-op until the application sets
// one, for example propagation.TraceContext{}.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) {
		if p != nil {
			c.prop = p
		}
	}
}

// WithPollInterval sets how often an Observer reads queue stats; default
// DefaultPollInterval. Each poll runs one stats query per queue.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.interval = d
		}
	}
}

// WithLogger sets the logger of the Observer's failed polls; default
// slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.log = l
		}
	}
}

func newConfig(opts []Option) config {
	c := config{interval: DefaultPollInterval}
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c
}
