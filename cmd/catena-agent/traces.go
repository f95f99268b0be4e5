package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/catena-cni/catena/libchain/release"
	"github.com/catena-cni/catena/node/agent"
	"github.com/catena-cni/catena/node/metrics"
	"github.com/catena-cni/catena/node/traces"
)

// traceExport is the trace export's component, configured by the OTEL_*
// variables of getenv: none when no endpoint is set, or when the
// configuration is wrong (logged: a bad variable never stops the agent,
// whose other work goes on). catena_trace_export_enabled says which.
func traceExport(ctx context.Context, getenv func(string) string, cacheDir, node string, m *metrics.Metrics, log *slog.Logger) []agent.Named {
	enabled := prometheus.NewGauge(prometheus.GaugeOpts{Name: "catena_trace_export_enabled",
		Help: "1 when the agent exports the journal's operations as OpenTelemetry spans (OTEL_EXPORTER_OTLP_ENDPOINT set and valid), else 0."})
	m.Registry.MustRegister(enabled)
	if getenv == nil {
		return nil
	}
	cfg, err := traces.FromEnv(getenv)
	if err != nil {
		log.Error("trace export off: its configuration is wrong", "error", err)
		return nil
	}
	if !cfg.Enabled {
		return nil
	}
	res, err := traces.Resource(ctx, node, release.String())
	if err != nil {
		log.Error("trace export off", "error", err)
		return nil
	}
	client, err := traces.NewClient(ctx, cfg)
	if err != nil {
		log.Error("trace export off", "error", err)
		return nil
	}
	enabled.Set(1)
	log.Info("trace export on", "endpoint", cfg.Endpoint, "protocol", cfg.Protocol, "sampler", cfg.SamplerName, "timeout", cfg.Timeout)
	return []agent.Named{{Name: "traces", Runnable: &traces.Exporter{CacheDir: cacheDir, Builder: traces.NewBuilder(res, cfg.Sampler),
		Client: client, Timeout: cfg.Timeout, Log: log.With("component", "traces"),
		Metrics: traces.NewMetrics(m.Registry, m.JournalSkipped(metrics.ReaderTraces))}}}
}
