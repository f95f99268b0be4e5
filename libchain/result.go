package libchain

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"
)

// decodeResult parses a result of any version from its JSON.
func decodeResult(raw json.RawMessage) (types.Result, error) {
	r, err := create.CreateFromBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding result: %w", err)
	}
	return r, nil
}

// convertResult renders raw as JSON in the wanted CNI version.
func convertResult(raw json.RawMessage, want string) (json.RawMessage, error) {
	r, err := decodeResult(raw)
	if err != nil {
		return nil, err
	}
	conv, err := r.GetAsVersion(want)
	if err != nil {
		return nil, fmt.Errorf("converting result from %s to %s: %w", r.Version(), want, err)
	}
	out, err := json.Marshal(conv)
	if err != nil {
		return nil, fmt.Errorf("encoding result as %s: %w", want, err)
	}
	return out, nil
}

// supportsPrevResult: prevResult exists from CNI 0.3.0 on.
func supportsPrevResult(v string) bool {
	ok, err := version.GreaterThanOrEqualTo(v, "0.3.0")
	return err == nil && ok
}

func atLeast(v, min string) bool {
	ok, err := version.GreaterThanOrEqualTo(v, min)
	return err == nil && ok
}

// withPrevResult returns conf (a delegate config without prevResult) with
// prev converted to the delegate's version, encoded as the stdin bytes.
func withPrevResult(conf json.RawMessage, cniVersion string, prev json.RawMessage) ([]byte, error) {
	if len(prev) == 0 || !supportsPrevResult(cniVersion) {
		return conf, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(conf, &fields); err != nil {
		return nil, fmt.Errorf("decoding cached config: %w", err)
	}
	conv, err := convertResult(prev, cniVersion)
	if err != nil {
		return nil, fmt.Errorf("prevResult: %w", err)
	}
	fields["prevResult"] = conv
	return json.Marshal(fields)
}
