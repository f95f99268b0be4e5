package traces

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// The OTLP protocols, as OTEL_EXPORTER_OTLP_PROTOCOL names them.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// DefaultServiceName is service.name when OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name none.
const DefaultServiceName = "catena"

// DefaultSampler is the sampler when OTEL_TRACES_SAMPLER is unset: an
// operation whose runtime sampled its span is exported, one whose runtime
// did not is not, and an operation that continues no trace is not either
// (the SDK's own default, parentbased_always_on, would make a root trace
// of every CNI call on the node).
const DefaultSampler = "parentbased_always_off"

// Config is the export's configuration, from the standard OpenTelemetry
// environment variables. The OTLP exporter reads the rest of them itself
// (OTEL_EXPORTER_OTLP_HEADERS, _CERTIFICATE, _INSECURE, _COMPRESSION and
// their _TRACES_ forms).
type Config struct {
	// Enabled: OTEL_EXPORTER_OTLP_ENDPOINT or _TRACES_ENDPOINT is set,
	// and OTEL_SDK_DISABLED is not true.
	Enabled bool
	// Endpoint is the one set, for the log.
	Endpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTP (the default, as the
	// specification's).
	Protocol string
	// Sampler and SamplerName: OTEL_TRACES_SAMPLER and _ARG, parsed.
	Sampler     sdktrace.Sampler
	SamplerName string
	// Timeout bounds each export call: OTEL_EXPORTER_OTLP_TIMEOUT (or
	// _TRACES_TIMEOUT), in milliseconds; 10 s by default.
	Timeout time.Duration
}

// FromEnv reads the configuration from getenv. An error names the
// variable and its value; the agent then logs it and exports nothing.
func FromEnv(getenv func(string) string) (Config, error) {
	var c Config
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	c.Endpoint = firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if c.Endpoint == "" {
		return c, nil
	}
	c.Protocol = firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolHTTP
	case ProtocolGRPC, ProtocolHTTP:
	default:
		return Config{}, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: catena-agent exports over %s or %s", c.Protocol, ProtocolGRPC, ProtocolHTTP)
	}
	c.Timeout = 10 * time.Second
	if v := firstSet(getenv, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"); v != "" {
		ms, err := strconv.ParseUint(v, 10, 31)
		if err != nil || ms == 0 {
			return Config{}, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT %q: not a positive number of milliseconds", v)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	c.SamplerName = strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
	if c.SamplerName == "" {
		c.SamplerName = DefaultSampler
	}
	var err error
	if c.Sampler, err = ParseSampler(c.SamplerName, getenv("OTEL_TRACES_SAMPLER_ARG")); err != nil {
		return Config{}, err
	}
	c.Enabled = true
	return c, nil
}

func firstSet(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// ParseSampler is the sampler OTEL_TRACES_SAMPLER names, with its
// argument (the ratio of the traceidratio ones, 1.0 when empty).
func ParseSampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if strings.TrimSpace(arg) == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(arg), 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG %q: not a ratio from 0 to 1", arg)
		}
		return r, nil
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER %q: not one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", name)
}

// Resource is the agent's resource: service.name catena, k8s.node.name
// and host.name node (when set), then what OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES say, which win.
func Resource(ctx context.Context, node, version string) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{semconv.ServiceName(DefaultServiceName)}
	if version != "" {
		attrs = append(attrs, semconv.ServiceVersion(version))
	}
	if node != "" {
		attrs = append(attrs, semconv.K8SNodeName(node), semconv.HostName(node))
	}
	r, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	return r, nil
}

// NewClient is the OTLP exporter of c's protocol, which reads its
// endpoint, headers and TLS settings from the environment, with its own
// retries off: the Exporter retries, with backoff, and bounds each call.
func NewClient(ctx context.Context, c Config) (*otlptrace.Exporter, error) {
	var client otlptrace.Client
	switch c.Protocol {
	case ProtocolGRPC:
		client = otlptracegrpc.NewClient(otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}),
			otlptracegrpc.WithTimeout(c.Timeout))
	default:
		client = otlptracehttp.NewClient(otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
			otlptracehttp.WithTimeout(c.Timeout))
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter (%s, %s): %w", c.Protocol, c.Endpoint, err)
	}
	return exp, nil
}
