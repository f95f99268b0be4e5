package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/skel"
)

// traceLogName is the trace log's file name in logDir.
const traceLogName = "trace.log"

// TraceCall is one line of the trace log: a call and the trace context
// carriers of its environment.
type TraceCall struct {
	Verb        string `json:"verb"`
	ContainerID string `json:"containerID"`
	// Env are the TRACEPARENT, TRACESTATE and BAGGAGE entries of the
	// environment as exec handed it (/proc/self/environ), in its order,
	// a name set twice twice.
	Env []string `json:"env"`
}

// logTrace appends verb's line to <dir>/trace.log.
func logTrace(dir, verb string, args *skel.CmdArgs) error {
	env, err := traceEnv("/proc/self/environ")
	if err != nil {
		return err
	}
	line, err := json.Marshal(TraceCall{Verb: verb, ContainerID: args.ContainerID, Env: env})
	if err != nil {
		return fmt.Errorf("spy: trace log: %w", err)
	}
	return appendLine(dir, traceLogName, string(line)+"\n")
}

// traceEnv are the carriers of the environment file at path (NUL-separated
// entries), every one of them: unlike os.Environ, duplicates are kept.
func traceEnv(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spy: trace log: %w", err)
	}
	env := []string{}
	for kv := range strings.SplitSeq(string(raw), "\x00") {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "TRACEPARENT", "TRACESTATE", "BAGGAGE":
			env = append(env, kv)
		}
	}
	return env, nil
}
