package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/spf13/afero"

	"github.com/catena-cni/catena/fileutil"
)

const (
	// defaultErrorCode is the code of injected failures when errorCode is
	// not set: the first code reserved for plugins by the CNI spec.
	defaultErrorCode uint = 100
	// defaultWaitTimeout bounds how long ADD waits for waitFile.
	defaultWaitTimeout = 60 * time.Second
	// pollInterval is how often ADD looks for waitFile.
	pollInterval = 10 * time.Millisecond
	// defaultCNIVersion is what the CNI spec assumes for a config without
	// cniVersion.
	defaultCNIVersion = "0.1.0"
)

// NetConf is failer's network configuration.
type NetConf struct {
	types.PluginConf

	FailAdd        bool   `json:"failAdd,omitempty"`
	FailDel        bool   `json:"failDel,omitempty"`
	FailCheck      bool   `json:"failCheck,omitempty"`
	FailStatus     bool   `json:"failStatus,omitempty"`
	ErrorCode      *uint  `json:"errorCode,omitempty"`
	FaultFile      string `json:"faultFile,omitempty"`
	FaultDir       string `json:"faultDir,omitempty"`
	HangAdd        string `json:"hangAdd,omitempty"`
	HangGC         string `json:"hangGC,omitempty"`
	WaitFile       string `json:"waitFile,omitempty"`
	WaitTimeout    string `json:"waitTimeout,omitempty"`
	DelRequiresAdd bool   `json:"delRequiresAdd,omitempty"`
	StateDir       string `json:"stateDir,omitempty"`
	LogFile        string `json:"logFile,omitempty"`
	PidFile        string `json:"pidFile,omitempty"`
	DaemonFile     string `json:"daemonFile,omitempty"`
	// Noise: see flood.go.
	PadError    int64 `json:"padError,omitempty"`
	FloodStdout int64 `json:"floodStdout,omitempty"`
	FloodStderr int64 `json:"floodStderr,omitempty"`

	hangAdd     time.Duration
	hangGC      time.Duration
	waitTimeout time.Duration
}

// decodeConf decodes failer's netconf and fills in defaults.
func decodeConf(data []byte) (*NetConf, error) {
	conf := &NetConf{}
	if err := json.Unmarshal(data, conf); err != nil {
		return nil, fmt.Errorf("failer: decode netconf: %w", err)
	}
	if conf.CNIVersion == "" {
		conf.CNIVersion = defaultCNIVersion
	}
	conf.waitTimeout = defaultWaitTimeout
	return conf, nil
}

// validate checks the netconf and parses its durations.
func (c *NetConf) validate() error {
	if c.HangAdd != "" {
		d, err := parseDuration("hangAdd", c.HangAdd)
		if err != nil {
			return err
		}
		c.hangAdd = d
	}
	if c.HangGC != "" {
		d, err := parseDuration("hangGC", c.HangGC)
		if err != nil {
			return err
		}
		c.hangGC = d
	}
	if c.WaitTimeout != "" {
		d, err := parseDuration("waitTimeout", c.WaitTimeout)
		if err != nil {
			return err
		}
		c.waitTimeout = d
	}
	if c.DelRequiresAdd && c.StateDir == "" {
		return errors.New("failer: delRequiresAdd needs stateDir")
	}
	if c.PidFile != "" && c.hangAdd <= 0 {
		return errors.New("failer: pidFile needs hangAdd (its child sleeps that long)")
	}
	return nil
}

func parseDuration(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("failer: invalid %s %q: %w", field, s, err)
	}
	if d < 0 {
		return 0, fmt.Errorf("failer: invalid %s %q: negative duration", field, s)
	}
	return d, nil
}

// parseConf decodes and validates failer's netconf.
func parseConf(data []byte) (*NetConf, error) {
	conf, err := decodeConf(data)
	if err != nil {
		return nil, err
	}
	if err := conf.validate(); err != nil {
		return nil, err
	}
	return conf, nil
}

// errorCode is the code of injected failures.
func (c *NetConf) errorCode() uint {
	if c.ErrorCode == nil {
		return defaultErrorCode
	}
	return *c.ErrorCode
}

// faultActive reports whether the fail* flags are in force: always without
// faultFile, otherwise only while faultFile exists.
func (c *NetConf) faultActive() (bool, error) {
	if c.FaultFile == "" {
		return true, nil
	}
	return exists(c.FaultFile)
}

// injected returns the CNI error for an injected failure of verb.
func (c *NetConf) injected(code uint, verb string, args *skel.CmdArgs) *types.Error {
	return types.NewError(code,
		fmt.Sprintf("failer: injected %s failure", verb)+c.padding(),
		fmt.Sprintf("containerID=%s ifname=%s", args.ContainerID, args.IfName))
}

// stateFile is where ADD records a successful attachment for delRequiresAdd.
func (c *NetConf) stateFile(args *skel.CmdArgs) string {
	return filepath.Join(c.StateDir, args.ContainerID+"-"+args.IfName)
}

// load parses the netconf and logs the invocation.
func load(verb string, args *skel.CmdArgs) (*NetConf, error) {
	conf, err := decodeConf(args.StdinData)
	if err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if err := conf.validate(); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
	}
	if err := logInvocation(conf.LogFile, verb, args); err != nil {
		return nil, types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	if err := conf.flood(verb, os.Stdout, os.Stderr); err != nil {
		return nil, types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	return conf, nil
}

// logInvocation appends one line for this invocation to logFile. The line is
// written with a single write on an O_APPEND descriptor so that concurrent
// invocations never interleave within a line.
func logInvocation(logFile, verb string, args *skel.CmdArgs) error {
	if logFile == "" {
		return nil
	}
	return appendLine(logFile, fmt.Sprintf("%s %s %s %s\n", verb, orDash(args.ContainerID), orDash(args.IfName), orDash(args.Netns)))
}

// appendLine appends one line to logFile with a single write.
func appendLine(logFile, line string) error {
	f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("failer: open logFile: %w", err)
	}
	if _, err := f.Write([]byte(line)); err != nil {
		_ = f.Close()
		return fmt.Errorf("failer: write logFile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("failer: close logFile: %w", err)
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cmdAdd runs ADD and prints the result to out.
func cmdAdd(args *skel.CmdArgs, out io.Writer) error {
	result, err := add(args)
	if err != nil {
		return err
	}
	if err := result.PrintTo(out); err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("failer: print result: %v", err), "")
	}
	return nil
}

// add runs ADD and returns the result, already in the config's cniVersion.
func add(args *skel.CmdArgs) (types.Result, error) {
	conf, err := load("ADD", args)
	if err != nil {
		return nil, err
	}
	if err := conf.applyDirFaults("ADD", args); err != nil {
		return nil, err
	}
	if conf.PidFile != "" {
		if err := startChild(conf.PidFile, conf.hangAdd); err != nil {
			return nil, types.NewError(types.ErrIOFailure, err.Error(), "")
		}
	}
	if conf.hangAdd > 0 {
		time.Sleep(conf.hangAdd)
	}
	if conf.WaitFile != "" {
		if err := waitForFile(conf.WaitFile, conf.waitTimeout); err != nil {
			return nil, types.NewError(conf.errorCode(), err.Error(), "")
		}
	}
	active, err := conf.faultActive()
	if err != nil {
		return nil, types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	if active && conf.FailAdd {
		return nil, conf.injected(conf.errorCode(), "ADD", args)
	}

	result, err := buildResult(conf)
	if err != nil {
		return nil, err
	}
	if conf.DelRequiresAdd {
		if err := writeState(conf.StateDir, conf.stateFile(args), []byte(args.Netns+"\n")); err != nil {
			return nil, types.NewError(types.ErrIOFailure, err.Error(), "")
		}
	}
	return result, nil
}

// buildResult converts the prevResult, if any, to the config's cniVersion, or
// makes an empty result of that version.
func buildResult(conf *NetConf) (types.Result, error) {
	if err := version.ParsePrevResult(&conf.PluginConf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, fmt.Sprintf("failer: %v", err), "")
	}
	if conf.PrevResult == nil {
		// Built directly in the requested version: pre-0.3.0 results
		// cannot be converted from a result without IPs.
		empty, err := create.Create(conf.CNIVersion, fmt.Appendf(nil, `{"cniVersion":%q}`, conf.CNIVersion))
		if err != nil {
			return nil, types.NewError(types.ErrIncompatibleCNIVersion,
				fmt.Sprintf("failer: empty result for %s: %v", conf.CNIVersion, err), "")
		}
		return empty, nil
	}
	converted, err := conf.PrevResult.GetAsVersion(conf.CNIVersion)
	if err != nil {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion,
			fmt.Sprintf("failer: convert result to %s: %v", conf.CNIVersion, err), "")
	}
	return converted, nil
}

// waitForFile polls for path every pollInterval until it exists or timeout
// passes.
func waitForFile(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := os.Stat(path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("failer: stat waitFile %s: %w", path, err)
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("failer: timed out after %s waiting for waitFile %s", timeout, path)
		}
		time.Sleep(pollInterval)
	}
}

// writeState writes data to path, a file of dir, atomically and durably
// (fileutil's atomic write: a temp file in the same directory, fsynced,
// renamed over path, then the directory fsynced).
func writeState(dir, path string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failer: create stateDir: %w", err)
	}
	if err := fileutil.WriteFileAtomic(afero.NewOsFs(), path, data, 0o600); err != nil {
		return fmt.Errorf("failer: write state: %w", err)
	}
	return nil
}

func cmdDel(args *skel.CmdArgs) error {
	conf, err := load("DEL", args)
	if err != nil {
		return err
	}
	if err := conf.applyDirFaults("DEL", args); err != nil {
		return err
	}
	active, err := conf.faultActive()
	if err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	if active && conf.FailDel {
		return conf.injected(conf.errorCode(), "DEL", args)
	}
	if err := conf.delState(args); err != nil {
		return err
	}
	if conf.DaemonFile != "" {
		if err := startDaemon(conf.DaemonFile); err != nil {
			return types.NewError(types.ErrIOFailure, err.Error(), "")
		}
	}
	return nil
}

// delState checks and removes the state ADD wrote, with delRequiresAdd.
func (c *NetConf) delState(args *skel.CmdArgs) error {
	if !c.DelRequiresAdd {
		return nil
	}
	path := c.stateFile(args)
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return types.NewError(c.errorCode(),
				fmt.Sprintf("failer: DEL without a prior successful ADD for containerID=%s ifname=%s (delRequiresAdd: no state file %s)",
					args.ContainerID, args.IfName, path), "")
		}
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("failer: stat state file: %v", err), "")
	}
	if err := os.Remove(path); err != nil {
		return types.NewError(types.ErrIOFailure, fmt.Sprintf("failer: remove state file: %v", err), "")
	}
	return nil
}

func cmdCheck(args *skel.CmdArgs) error {
	conf, err := load("CHECK", args)
	if err != nil {
		return err
	}
	active, err := conf.faultActive()
	if err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	if active && conf.FailCheck {
		return conf.injected(conf.errorCode(), "CHECK", args)
	}
	return nil
}

func cmdStatus(args *skel.CmdArgs) error {
	conf, err := load("STATUS", args)
	if err != nil {
		return err
	}
	active, err := conf.faultActive()
	if err != nil {
		return types.NewError(types.ErrIOFailure, err.Error(), "")
	}
	if active && conf.FailStatus {
		return conf.injected(types.ErrPluginNotAvailable, "STATUS", args)
	}
	return nil
}
