package main

import (
	"bytes"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Getenv("CNI_COMMAND"), os.Stdin, os.Stdout))
}

func run(verb string, stdin io.Reader, stdout io.Writer) int {
	conf, err := io.ReadAll(io.LimitReader(stdin, 1<<20))
	if err != nil {
		return 1
	}
	switch verb {
	case "ADD":
		v := cniVersion(conf)
		if v == "" {
			v = "1.1.0"
		}
		ipVersion := "" // 0.3.x and 0.4.0 results name the IP version
		if strings.HasPrefix(v, "0.") {
			ipVersion = `"version":"4",`
		}
		_, err = io.WriteString(stdout, `{"cniVersion":"`+v+`","interfaces":[{"name":"eth0","mac":"02:00:00:00:00:01","sandbox":"/var/run/netns/noop"}],`+
			`"ips":[{`+ipVersion+`"interface":0,"address":"10.99.0.2/24","gateway":"10.99.0.1"}],"dns":{}}`+"\n")
	case "VERSION":
		_, err = io.WriteString(stdout, `{"cniVersion":"1.1.0","supportedVersions":["0.3.0","0.3.1","0.4.0","1.0.0","1.1.0"]}`+"\n")
	case "DEL", "CHECK", "STATUS", "GC":
	default:
		_, _ = io.WriteString(stdout, `{"cniVersion":"1.1.0","code":4,"msg":"noop: unknown CNI_COMMAND `+verb+`"}`+"\n")
		return 1
	}
	if err != nil {
		return 1
	}
	return 0
}

// cniVersion is the value of the first "cniVersion" key in conf, or "". A
// delegate's config is written by catena with sorted keys, so the first one
// is the top level's (prevResult, which has one too, sorts after it).
func cniVersion(conf []byte) string {
	_, rest, ok := bytes.Cut(conf, []byte(`"cniVersion"`))
	if !ok {
		return ""
	}
	rest = bytes.TrimLeft(rest, " \t\r\n")
	rest, ok = bytes.CutPrefix(rest, []byte(":"))
	if !ok {
		return ""
	}
	rest = bytes.TrimLeft(rest, " \t\r\n")
	rest, ok = bytes.CutPrefix(rest, []byte(`"`))
	if !ok {
		return ""
	}
	v, _, ok := bytes.Cut(rest, []byte(`"`))
	if !ok || len(v) > 16 {
		return ""
	}
	return string(v)
}
