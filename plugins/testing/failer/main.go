package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/version"
)

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    func(args *skel.CmdArgs) error { return cmdAdd(args, os.Stdout) },
		Del:    cmdDelHanging,
		Check:  cmdCheck,
		Status: cmdStatus,
		GC:     cmdGC,
	}, version.All, "CNI failer test plugin (catena)")
}
