package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"
)

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    func(args *skel.CmdArgs) error { return cmdAdd(args, os.Stdout) },
		Del:    func(args *skel.CmdArgs) error { return record("DEL", args) },
		Check:  func(args *skel.CmdArgs) error { return record("CHECK", args) },
		Status: func(*skel.CmdArgs) error { return nil },
		GC:     func(*skel.CmdArgs) error { return nil },
	}, version.All, "CNI spy test plugin (catena)")
}
