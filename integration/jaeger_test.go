package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// requireJaeger is the path of Jaeger v2, bin/tools/jaeger (under
// CATENA_BIN when set), which scripts/install-jaeger.sh builds. It fails
// under CI=true, and skips elsewhere, when it is missing.
func requireJaeger(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CATENA_BIN")
	if dir == "" {
		dir = filepath.Join(repoRoot(), "bin")
	}
	bin := filepath.Join(dir, "tools", "jaeger")
	fi, err := os.Stat(bin)
	if err == nil && fi.Mode()&0o111 == 0 {
		err = fmt.Errorf("%s is not executable", bin)
	}
	if err == nil {
		return bin
	}
	msg := fmt.Sprintf("Jaeger missing at %s (run `make jaeger`, which runs scripts/install-jaeger.sh): %v", bin, err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true: the tests must run, not skip")
	}
	t.Skip(msg)
	return ""
}

// jaeger is a private Jaeger v2 on loopback: OTLP receivers, an in-memory
// trace store and the query API, on free ports of 127.0.0.1 that stay the
// same across Stop and Start. Its store is in memory: what it held is
// lost when it stops, so a restarted Jaeger holds only what was sent to it
// since.
type jaeger struct {
	// OTLPGRPC and OTLPHTTP are the OTLP receivers' host:port (gRPC, and
	// HTTP with its /v1/traces); Query is the query API's (HTTP).
	OTLPGRPC, OTLPHTTP, Query string

	t      *testing.T // the test that started it, for its log lines
	bin    string
	config string
	log    string
	d      *daemon // nil before the first Start
	client *http.Client
}

// errNoTrace is what Trace returns when Jaeger holds no span of the trace.
var errNoTrace = errors.New("jaeger: trace not found")

// jaegerConfig is Jaeger v2's configuration (an OpenTelemetry Collector's):
// OTLP in, the memory store, the query API; no other extension, no
// processor (a span is stored as soon as it arrives), and no telemetry of
// its own but its log: no metrics endpoint, no collector traces, and no
// query traces (jaeger_query's enable_tracing, on by default, exports to
// localhost:4317 and holds up its shutdown retrying there). Its clock skew
// adjustment is off: the spans read back start as they were sent.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    logs:
      level: info
    metrics:
      level: none
    traces:
      level: none
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    max_clock_skew_adjust: 0s
    enable_tracing: false
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// startJaeger starts a private Jaeger with its config and log in a
// t.TempDir() and waits until it answers; t.Cleanup stops it (its process
// group), and prints its log's tail if the test failed.
func startJaeger(t *testing.T) *jaeger {
	t.Helper()
	bin := requireJaeger(t)
	dir := t.TempDir()
	addr := func() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))) }
	j := &jaeger{
		OTLPGRPC: addr(), OTLPHTTP: addr(), Query: addr(),
		t: t, bin: bin,
		config: filepath.Join(dir, "jaeger.yaml"),
		log:    filepath.Join(dir, "jaeger.log"),
		client: &http.Client{Timeout: 10 * time.Second},
	}
	queryGRPC := addr()
	cfg := fmt.Sprintf(jaegerConfig, j.Query, queryGRPC, j.OTLPGRPC, j.OTLPHTTP)
	require.NoError(t, os.WriteFile(j.config, []byte(cfg), 0o600))
	t.Cleanup(func() {
		j.stop()
		if t.Failed() {
			t.Log(j.d.logTail())
		}
	})
	j.Start(t)
	return j
}

// Start starts Jaeger on its ports, appending to its log, and waits until
// its query API answers and its OTLP receivers accept connections.
func (j *jaeger) Start(t *testing.T) {
	t.Helper()
	require.False(t, j.d.running(), "jaeger is already running (pid %d)", j.pid())
	logf, err := os.OpenFile(j.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(t, err)
	defer func() { _ = logf.Close() }()
	d := &daemon{t: j.t, name: "jaeger", log: j.log, exited: make(chan struct{})}
	d.cmd = exec.Command(j.bin, "--config", j.config)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// Its own process group, which Stop signals whole.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, d.cmd.Start(), "starting %s", j.bin)
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	j.d = d
	took := waitFor(t, "jaeger answers", 60*time.Second, 100*time.Millisecond, j.ready, d)
	t.Logf("jaeger (pid %d) up in %s: OTLP gRPC %s, OTLP HTTP %s, query %s", d.cmd.Process.Pid, took.Round(time.Millisecond), j.OTLPGRPC, j.OTLPHTTP, j.Query)
}

// ready succeeds when the query API answers and both receivers listen.
func (j *jaeger) ready() error {
	if _, err := j.Services(nil); err != nil {
		return err
	}
	for _, a := range []string{j.OTLPGRPC, j.OTLPHTTP} {
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			return err
		}
		_ = c.Close()
	}
	return nil
}

// Stop stops Jaeger, SIGTERM to its process group then SIGKILL after 10 s,
// and waits for its exit; what it stored is lost. It does nothing when
// Jaeger is not running.
func (j *jaeger) Stop(t *testing.T) {
	t.Helper()
	j.stop()
}

// Restart stops Jaeger and starts it again on the same ports, with an
// empty store.
func (j *jaeger) Restart(t *testing.T) {
	t.Helper()
	j.Stop(t)
	j.Start(t)
}

func (j *jaeger) stop() {
	if !j.d.running() {
		return
	}
	pid := j.pid()
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-j.d.exited:
	case <-time.After(10 * time.Second):
		j.t.Logf("jaeger (pid %d) ignored SIGTERM for 10s; killing its process group", pid)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-j.d.exited
	}
	// Anything left in its group (it starts none) goes too.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

func (j *jaeger) pid() int {
	if j.d == nil || j.d.cmd.Process == nil {
		return 0
	}
	return j.d.cmd.Process.Pid
}

// jaegerSpan is one span as Jaeger's query API returns it.
type jaegerSpan struct {
	// TraceID and SpanID are lowercase hex, 32 and 16 digits as
	// OpenTelemetry prints them; ParentSpanID is the CHILD_OF reference's
	// span, "" for a root.
	TraceID, SpanID, ParentSpanID string
	Name                          string // the operation
	Service                       string // its process's service.name
	Start                         time.Time
	Duration                      time.Duration
	// Attributes are the span's tags, their values as strings (a bool
	// "true", an int "3"). Jaeger adds its own: span.kind,
	// otel.scope.name, otel.status_code and such.
	Attributes map[string]string
	Events     []string // the names of its events (Jaeger's logs), in order
	// Error is an error status (tag otel.status_code=ERROR, or error=true);
	// StatusMessage its description (otel.status_description).
	Error         bool
	StatusMessage string
}

// jaegerKV is a tag or log field of the query API.
type jaegerKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// jaegerTraceJSON is one trace of the query API's /api/traces.
type jaegerTraceJSON struct {
	TraceID string `json:"traceID"`
	Spans   []struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		References    []struct {
			RefType string `json:"refType"`
			TraceID string `json:"traceID"`
			SpanID  string `json:"spanID"`
		} `json:"references"`
		StartTime int64      `json:"startTime"` // µs since the epoch
		Duration  int64      `json:"duration"`  // µs
		Tags      []jaegerKV `json:"tags"`
		Logs      []struct {
			Fields []jaegerKV `json:"fields"`
		} `json:"logs"`
		ProcessID string `json:"processID"`
	} `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

// get GETs the query API's path (with its query) into the envelope's data,
// and returns the HTTP status.
func (j *jaeger) get(path string, data any) (int, error) {
	resp, err := j.client.Get("http://" + j.Query + path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var env struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		} `json:"errors"`
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: %s, body not JSON: %w", path, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK || len(env.Errors) > 0 {
		return resp.StatusCode, fmt.Errorf("GET %s: %s: %v", path, resp.Status, env.Errors)
	}
	if len(env.Data) == 0 || string(env.Data) == "null" {
		return resp.StatusCode, nil
	}
	dec = json.NewDecoder(bytes.NewReader(env.Data))
	dec.UseNumber()
	if err := dec.Decode(data); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: data: %w", path, err)
	}
	return resp.StatusCode, nil
}

// TraceJSON is the query API's answer for the trace, as it sent it (raw).
func (j *jaeger) TraceJSON(t *testing.T, traceID string) []byte {
	t.Helper()
	resp, err := j.client.Get("http://" + j.Query + "/api/traces/" + url.PathEscape(traceID) + "?raw=true")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return b
}

// Trace is the trace's spans (traceID in hex), by start time, as Jaeger
// stored them (raw=true: no adjuster, whose deduplication would hide a
// span sent twice); errNoTrace when Jaeger holds none of them.
func (j *jaeger) Trace(t *testing.T, traceID string) ([]jaegerSpan, error) {
	if t != nil {
		t.Helper()
	}
	var traces []jaegerTraceJSON
	status, err := j.get("/api/traces/"+url.PathEscape(traceID)+"?raw=true", &traces)
	if status == http.StatusNotFound {
		return nil, errNoTrace
	}
	if err != nil {
		return nil, err
	}
	var spans []jaegerSpan
	for _, tr := range traces {
		spans = append(spans, tr.spans()...)
	}
	if len(spans) == 0 {
		return nil, errNoTrace
	}
	sort.SliceStable(spans, func(a, b int) bool { return spans[a].Start.Before(spans[b].Start) })
	return spans, nil
}

// WaitTrace polls Trace until it has at least n spans, for up to 30 s.
func (j *jaeger) WaitTrace(t *testing.T, traceID string, n int) []jaegerSpan {
	t.Helper()
	var spans []jaegerSpan
	waitFor(t, fmt.Sprintf("jaeger holds %d spans of trace %s", n, traceID), 30*time.Second, 100*time.Millisecond, func() error {
		var err error
		spans, err = j.Trace(t, traceID)
		if err != nil {
			return err
		}
		if len(spans) < n {
			return fmt.Errorf("%d spans", len(spans))
		}
		return nil
	}, j.d)
	return spans
}

func (tr jaegerTraceJSON) spans() []jaegerSpan {
	var out []jaegerSpan
	for _, s := range tr.Spans {
		js := jaegerSpan{
			TraceID:    hexID(s.TraceID, 32),
			SpanID:     hexID(s.SpanID, 16),
			Name:       s.OperationName,
			Service:    tr.Processes[s.ProcessID].ServiceName,
			Start:      time.UnixMicro(s.StartTime),
			Duration:   time.Duration(s.Duration) * time.Microsecond,
			Attributes: map[string]string{},
		}
		for _, r := range s.References {
			if r.RefType == "CHILD_OF" {
				js.ParentSpanID = hexID(r.SpanID, 16)
				break
			}
		}
		for _, kv := range s.Tags {
			js.Attributes[kv.Key] = kvString(kv.Value)
		}
		for _, l := range s.Logs {
			for _, f := range l.Fields {
				if f.Key == "event" {
					js.Events = append(js.Events, kvString(f.Value))
				}
			}
		}
		js.Error = js.Attributes["otel.status_code"] == "ERROR" || js.Attributes["error"] == "true"
		js.StatusMessage = js.Attributes["otel.status_description"]
		out = append(out, js)
	}
	return out
}

// hexID is a Jaeger ID as OpenTelemetry prints it: lowercase, digits
// zero-padded to n (Jaeger prints a trace ID whose high half is zero in
// 16).
func hexID(id string, n int) string {
	id = strings.ToLower(id)
	if len(id) < n {
		id = strings.Repeat("0", n-len(id)) + id
	}
	return id
}

// kvString is a tag's value as a string.
func kvString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return ""
	default:
		raw, _ := json.Marshal(v)
		return string(raw)
	}
}

// FindTraces is the IDs (32 hex digits) of the traces that have spans of
// service, started in the last two days (the query API's default), at
// most 1000.
func (j *jaeger) FindTraces(t *testing.T, service string) ([]string, error) {
	if t != nil {
		t.Helper()
	}
	q := url.Values{
		"service": {service},
		"limit":   {"1000"},
		// µs; the default end is the query's now, which a span started
		// on a clock a little ahead would miss.
		"end": {strconv.FormatInt(time.Now().Add(time.Minute).UnixMicro(), 10)},
	}
	var traces []jaegerTraceJSON
	if _, err := j.get("/api/traces?"+q.Encode(), &traces); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(traces))
	for _, tr := range traces {
		ids = append(ids, hexID(tr.TraceID, 32))
	}
	return ids, nil
}

// Services is the names of the services Jaeger holds spans of.
func (j *jaeger) Services(t *testing.T) ([]string, error) {
	if t != nil {
		t.Helper()
	}
	var services []string
	if _, err := j.get("/api/services", &services); err != nil {
		return nil, err
	}
	return services, nil
}

// sendTestTrace sends, over OTLP gRPC, a trace of service: a parent span
// and a child with an attribute, an event and an error status; it returns
// their span contexts once they are exported.
func sendTestTrace(t *testing.T, j *jaeger, service string) (parent, child trace.SpanContext) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(j.OTLPGRPC), otlptracegrpc.WithInsecure())
	require.NoError(t, err)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	)
	defer func() { require.NoError(t, tp.Shutdown(ctx)) }()
	tr := tp.Tracer("github.com/catena-cni/catena/integration")
	pctx, p := tr.Start(ctx, "cni.ADD")
	_, c := tr.Start(pctx, "plugin.bridge", trace.WithAttributes(
		attribute.String("cni.plugin", "bridge"), attribute.Int("cni.attempt", 3)))
	c.AddEvent("retry")
	c.SetStatus(codes.Error, "bridge: no such device")
	c.End()
	p.End()
	return p.SpanContext(), c.SpanContext()
}

// TestJaegerRoundTrip sends a parent and a child span to a private Jaeger
// with the OpenTelemetry SDK and reads them back through its query API:
// the tree, the service, the attributes, the event and the error status.
func TestJaegerRoundTrip(t *testing.T) {
	j := startJaeger(t)
	const service = "catena-it-jaeger"
	pc, cc := sendTestTrace(t, j, service)
	traceID := pc.TraceID().String()

	spans := j.WaitTrace(t, traceID, 2)
	require.Len(t, spans, 2, "the trace's spans: %+v", spans)
	byName := map[string]jaegerSpan{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	parent, child := byName["cni.ADD"], byName["plugin.bridge"]
	require.NotEmpty(t, parent.SpanID, "no span cni.ADD in %+v", spans)
	require.NotEmpty(t, child.SpanID, "no span plugin.bridge in %+v", spans)

	for _, s := range spans {
		assert.Equal(t, traceID, s.TraceID, "%s's trace", s.Name)
		assert.Equal(t, service, s.Service, "%s's service", s.Name)
		assert.False(t, s.Start.IsZero(), "%s's start", s.Name)
	}
	assert.Equal(t, pc.SpanID().String(), parent.SpanID)
	assert.Empty(t, parent.ParentSpanID, "the parent is the trace's root")
	assert.False(t, parent.Error, "the parent's status is unset: %+v", parent.Attributes)
	assert.Empty(t, parent.Events)

	assert.Equal(t, cc.SpanID().String(), child.SpanID)
	assert.Equal(t, parent.SpanID, child.ParentSpanID, "the child's CHILD_OF reference")
	assert.Equal(t, "bridge", child.Attributes["cni.plugin"])
	assert.Equal(t, "3", child.Attributes["cni.attempt"])
	assert.Equal(t, []string{"retry"}, child.Events)
	assert.True(t, child.Error, "the child's error status: %+v", child.Attributes)
	assert.Equal(t, "bridge: no such device", child.StatusMessage)
	assert.False(t, child.Start.Before(parent.Start), "the child starts within its parent")
	assert.LessOrEqual(t, child.Duration, parent.Duration, "the child ends within its parent")

	services, err := j.Services(t)
	require.NoError(t, err)
	assert.Contains(t, services, service)
	ids, err := j.FindTraces(t, service)
	require.NoError(t, err)
	assert.Equal(t, []string{traceID}, ids, "the service's traces")

	_, err = j.Trace(t, trace.TraceID{1}.String())
	assert.ErrorIs(t, err, errNoTrace, "a trace never sent")
}

// TestJaegerRestart restarts the private Jaeger: it comes back on the same
// ports with an empty store, and takes new spans.
func TestJaegerRestart(t *testing.T) {
	j := startJaeger(t)
	ports := []string{j.OTLPGRPC, j.OTLPHTTP, j.Query}
	before, _ := sendTestTrace(t, j, "catena-it-jaeger-before")
	j.WaitTrace(t, before.TraceID().String(), 2)

	j.Restart(t)
	assert.Equal(t, ports, []string{j.OTLPGRPC, j.OTLPHTTP, j.Query}, "the same ports")
	_, err := j.Trace(t, before.TraceID().String())
	assert.ErrorIs(t, err, errNoTrace, "the memory store is empty after a restart")
	services, err := j.Services(t)
	require.NoError(t, err)
	assert.False(t, slices.Contains(services, "catena-it-jaeger-before"), "services after a restart: %v", services)

	after, _ := sendTestTrace(t, j, "catena-it-jaeger-after")
	spans := j.WaitTrace(t, after.TraceID().String(), 2)
	assert.Equal(t, "catena-it-jaeger-after", spans[0].Service)
}
