package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// hangDelConf is the part of failer's netconf that makes DEL hang.
type hangDelConf struct {
	HangDel   string `json:"hangDel,omitempty"`
	FaultFile string `json:"faultFile,omitempty"`
}

// cmdDelHanging sleeps hangDel before DEL, while faultFile exists if it is
// set (like the fail* flags), then runs DEL as usual.
func cmdDelHanging(args *skel.CmdArgs) error {
	var hc hangDelConf
	if err := json.Unmarshal(args.StdinData, &hc); err != nil {
		return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("failer: decode netconf: %v", err), "")
	}
	if hc.HangDel != "" {
		d, err := parseDuration("hangDel", hc.HangDel)
		if err != nil {
			return types.NewError(types.ErrInvalidNetworkConfig, err.Error(), "")
		}
		active, err := (&NetConf{FaultFile: hc.FaultFile}).faultActive()
		if err != nil {
			return types.NewError(types.ErrIOFailure, err.Error(), "")
		}
		if active {
			time.Sleep(d)
		}
	}
	return cmdDel(args)
}
