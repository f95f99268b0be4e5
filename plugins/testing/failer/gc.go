package main

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// cmdGC sleeps hangGC, then logs, besides the invocation (logged before the
// sleep), the valid attachments it was given: "GC-VALID <containerID>/<ifname>
// ..." (sorted), so that tests can see what a delegate's own GC would keep,
// and what ran while a GC was in progress.
func cmdGC(args *skel.CmdArgs) error {
	conf, err := load("GC", args)
	if err != nil {
		return err
	}
	if conf.hangGC > 0 {
		time.Sleep(conf.hangGC)
	}
	if conf.LogFile == "" {
		return nil
	}
	var in struct {
		Valid []types.GCAttachment `json:"cni.dev/valid-attachments"`
	}
	if err := json.Unmarshal(args.StdinData, &in); err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	names := make([]string, 0, len(in.Valid))
	for _, a := range in.Valid {
		names = append(names, a.ContainerID+"/"+a.IfName)
	}
	sort.Strings(names)
	return appendLine(conf.LogFile, "GC-VALID "+strings.Join(names, " ")+"\n")
}
