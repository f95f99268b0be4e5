package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// delegateType is the plugin that does the work.
const delegateType = "ptp"

// conf is what calicostub reads of its config.
type conf struct {
	CNIVersion string          `json:"cniVersion"`
	Generation json.RawMessage `json:"generation,omitempty"`
	RecordFile string          `json:"recordFile,omitempty"`
}

// Entry is one line of recordFile.
type Entry struct {
	Cmd         string          `json:"cmd"`
	ContainerID string          `json:"containerID"`
	IfName      string          `json:"ifName"`
	Generation  json.RawMessage `json:"generation,omitempty"`
}

// parse reads stdin's config and returns it with its type changed to ptp.
func parse(stdin []byte) (conf, []byte, error) {
	var c conf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return c, nil, fmt.Errorf("calicostub: parsing the config: %w", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &all); err != nil {
		return c, nil, fmt.Errorf("calicostub: parsing the config: %w", err)
	}
	all["type"] = json.RawMessage(`"` + delegateType + `"`)
	out, err := json.Marshal(all)
	if err != nil {
		return c, nil, fmt.Errorf("calicostub: the delegate's config: %w", err)
	}
	return c, out, nil
}

func cmdAdd(args *skel.CmdArgs) error {
	c, delegate, err := parse(args.StdinData)
	if err != nil {
		return err
	}
	res, err := invoke.DelegateAdd(context.Background(), delegateType, delegate, nil)
	if err != nil {
		return fmt.Errorf("calicostub: %s ADD: %w", delegateType, err)
	}
	if err := record(c, "ADD", args); err != nil {
		return err
	}
	return types.PrintResult(res, c.CNIVersion)
}

func cmdCheck(args *skel.CmdArgs) error {
	c, delegate, err := parse(args.StdinData)
	if err != nil {
		return err
	}
	if err := invoke.DelegateCheck(context.Background(), delegateType, delegate, nil); err != nil {
		return fmt.Errorf("calicostub: %s CHECK: %w", delegateType, err)
	}
	return record(c, "CHECK", args)
}

func cmdDel(args *skel.CmdArgs) error {
	c, delegate, err := parse(args.StdinData)
	if err != nil {
		return err
	}
	if err := invoke.DelegateDel(context.Background(), delegateType, delegate, nil); err != nil {
		return fmt.Errorf("calicostub: %s DEL: %w", delegateType, err)
	}
	return record(c, "DEL", args)
}

// record appends the verb's entry to c.RecordFile, if set, in one write.
func record(c conf, cmd string, args *skel.CmdArgs) error {
	if c.RecordFile == "" {
		return nil
	}
	line, err := json.Marshal(Entry{Cmd: cmd, ContainerID: args.ContainerID, IfName: args.IfName, Generation: c.Generation})
	if err != nil {
		return fmt.Errorf("calicostub: recordFile entry: %w", err)
	}
	f, err := os.OpenFile(c.RecordFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("calicostub: open recordFile: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close() // the write's error is the one to report
		return fmt.Errorf("calicostub: write recordFile %s: %w", c.RecordFile, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("calicostub: close recordFile %s: %w", c.RecordFile, err)
	}
	return nil
}
