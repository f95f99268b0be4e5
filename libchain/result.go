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
	return newPrevResults(prev).stdin(conf, cniVersion)
}

// prevResults is one result as the prevResult of several delegates: each
// version it is converted to is converted once, and the bytes reused for
// every later delegate of that version. A conversion, a decode and an
// encode of the whole result, is most of a step's stdin, and the
// delegates of a chain mostly share one version. The stdin bytes are the
// same as withPrevResult's for each delegate.
type prevResults struct {
	raw  json.RawMessage
	conv map[string]json.RawMessage // by version
}

func newPrevResults(raw json.RawMessage) *prevResults {
	return &prevResults{raw: raw, conv: map[string]json.RawMessage{}}
}

// stdin is withPrevResult(conf, cniVersion, p.raw).
func (p *prevResults) stdin(conf json.RawMessage, cniVersion string) ([]byte, error) {
	if len(p.raw) == 0 || !supportsPrevResult(cniVersion) {
		return conf, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(conf, &fields); err != nil {
		return nil, fmt.Errorf("decoding cached config: %w", err)
	}
	conv, ok := p.conv[cniVersion]
	if !ok {
		var err error
		if conv, err = convertResult(p.raw, cniVersion); err != nil {
			return nil, fmt.Errorf("prevResult: %w", err)
		}
		p.conv[cniVersion] = conv
	}
	fields["prevResult"] = conv
	return json.Marshal(fields)
}
