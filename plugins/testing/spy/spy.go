package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"
	"golang.org/x/sys/unix"
)

// logName is the log's file name in logDir.
const logName = "spy.log"

// defaultCNIVersion is what the CNI spec assumes for a config without
// cniVersion.
const defaultCNIVersion = "0.1.0"

// NetConf is spy's network configuration.
type NetConf struct {
	types.PluginConf

	LogDir string `json:"logDir"`
	// TraceLog: each call also appends its trace context to
	// <logDir>/trace.log (tracelog.go).
	TraceLog bool `json:"traceLog,omitempty"`
}

// load decodes the netconf and its prevResult.
func load(args *skel.CmdArgs) (*NetConf, error) {
	conf := &NetConf{}
	if err := json.Unmarshal(args.StdinData, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("spy: decode netconf: %v", err), "")
	}
	if conf.LogDir == "" {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "spy: logDir is required", "")
	}
	if conf.CNIVersion == "" {
		conf.CNIVersion = defaultCNIVersion
	}
	if err := version.ParsePrevResult(&conf.PluginConf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("spy: prevResult: %v", err), "")
	}
	return conf, nil
}

// ips are the addresses of the prevResult, without their prefix length.
func (c *NetConf) ips() ([]string, error) {
	if c.PrevResult == nil {
		return nil, nil
	}
	res, err := current.NewResultFromResult(c.PrevResult)
	if err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("spy: prevResult: %v", err), "")
	}
	var ips []string
	for _, ip := range res.IPs {
		ips = append(ips, ip.Address.IP.String())
	}
	return ips, nil
}

// record logs one call of verb.
func record(verb string, args *skel.CmdArgs) error {
	_, err := logCall(verb, args)
	return err
}

// logCall decodes the netconf, appends the call's line to the log and
// returns the netconf.
func logCall(verb string, args *skel.CmdArgs) (*NetConf, error) {
	conf, err := load(args)
	if err != nil {
		return nil, err
	}
	ips, err := conf.ips()
	if err != nil {
		return nil, err
	}
	if err := appendLine(conf.LogDir, logName, line(monotonic(), time.Now(), verb, args, ips)); err != nil {
		return nil, types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	if conf.TraceLog {
		if err := logTrace(conf.LogDir, verb, args); err != nil {
			return nil, types.NewError(types.ErrIOFailure, err.Error(), "")
		}
	}
	return conf, nil
}

// cmdAdd logs the ADD and prints the prevResult, converted to the
// config's cniVersion, to out.
func cmdAdd(args *skel.CmdArgs, out io.Writer) error {
	conf, err := logCall("ADD", args)
	if err != nil {
		return err
	}
	result, err := passThrough(conf)
	if err != nil {
		return err
	}
	if err := result.PrintTo(out); err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("spy: print result: %v", err), "")
	}
	return nil
}

// passThrough is the prevResult in the config's cniVersion, or an empty
// result of that version when there is none.
func passThrough(conf *NetConf) (types.Result, error) {
	if conf.PrevResult == nil {
		empty, err := create.Create(conf.CNIVersion, fmt.Appendf(nil, `{"cniVersion":%q}`, conf.CNIVersion))
		if err != nil {
			return nil, types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("spy: empty result for %s: %v", conf.CNIVersion, err), "")
		}
		return empty, nil
	}
	converted, err := conf.PrevResult.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("spy: convert result to %s: %v", conf.CNIVersion, err), "")
	}
	return converted, nil
}

// monotonic is CLOCK_MONOTONIC in nanoseconds: the same clock in every
// process of the host, unlike the monotonic reading of time.Now.
func monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return -1
	}
	return ts.Nano()
}

// line is one call's log line.
func line(mono int64, wall time.Time, verb string, args *skel.CmdArgs, ips []string) string {
	list := strings.Join(ips, ",")
	return fmt.Sprintf("%d %s %s %s %s %s\n", mono, wall.UTC().Format(time.RFC3339Nano), verb,
		orDash(args.ContainerID), orDash(args.IfName), orDash(list))
}

// appendLine appends text to the log name in dir with a single write on
// an O_APPEND descriptor.
func appendLine(dir, name, text string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("spy: make logDir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("spy: open log: %w", err)
	}
	if _, err := f.Write([]byte(text)); err != nil {
		_ = f.Close()
		return fmt.Errorf("spy: write log: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("spy: close log: %w", err)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
