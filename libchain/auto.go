package libchain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// AutoVersion is the cniVersion of a delegate whose version Catena
// negotiates with its binary: the highest version both the binary's
// VERSION and Catena's result conversion support.
const AutoVersion = "auto"

// Probed is a delegate binary's answer to VERSION.
type Probed struct {
	// Binary is the absolute path found in CNI_PATH.
	Binary string
	// Supported is its supportedVersions.
	Supported []string
	// Cached: the answer came from the version cache; no VERSION ran.
	Cached bool
}

// VersionProber asks a delegate's binary which CNI versions it supports.
type VersionProber interface {
	// Probe returns the answer to VERSION of the binary typ in CNI_PATH
	// cniPath, within ctx.
	Probe(ctx context.Context, typ, cniPath string) (Probed, error)
	// Forget drops what is cached of the binary at path: its answer
	// proved wrong.
	Forget(binary string) error
}

// hasAuto reports whether any delegate's version is still to resolve.
func hasAuto(conf *NetConf) bool {
	return slices.ContainsFunc(conf.Delegates, func(d Delegate) bool { return d.Auto && d.CNIVersion == "" })
}

// resolveAll returns req with every "auto" delegate's version resolved
// (resolve), for a verb that calls the delegates from the current config:
// ADD, STATUS, GC. DEL and CHECK call them at the versions their ADD
// recorded and never ask again.
func (e *Engine) resolveAll(ctx context.Context, req Request, verb string) (Request, error) {
	if !hasAuto(req.Conf) {
		return req, nil
	}
	conf := *req.Conf
	conf.Delegates = slices.Clone(req.Conf.Delegates)
	for i := range conf.Delegates {
		d, err := e.resolve(ctx, req, conf.Delegates[i])
		if err != nil {
			return req, cniError(types.ErrIncompatibleCNIVersion, "%s of network %q: %w", verb, req.Conf.Name, err)
		}
		conf.Delegates[i] = d
	}
	req.Conf = &conf
	return req, nil
}

// resolve sets the version of an "auto" delegate: its binary's VERSION
// answer (cached by the prober), then the highest version in both that
// answer and what Catena converts (Negotiate). A VERSION that fails, hangs
// past delegateTimeout or answers nothing usable is an error naming the
// delegate and its binary, code 1 (a binary missing from CNI_PATH keeps
// its code 50): never a guess.
func (e *Engine) resolve(ctx context.Context, req Request, d Delegate) (Delegate, error) {
	if !d.Auto || d.CNIVersion != "" {
		return d, nil
	}
	if e.Versions == nil {
		return d, types.NewError(types.ErrIncompatibleCNIVersion, fmt.Sprintf("%s: cniVersion %q: this catena cannot ask delegates their VERSION", d, AutoVersion), "")
	}
	pctx, cancel := context.WithTimeout(ctx, req.Conf.DelegateTimeout)
	defer cancel()
	// VERSION gets no trace context (its answer is cached for later
	// operations), but a span in the journal when it ran.
	start := e.now()
	p, err := e.Versions.Probe(pctx, d.Type, req.Args.Path)
	if !p.Cached {
		e.endCall(ctx, callSpan{id: e.spanID(), start: start}, d.Index, d.Type, "VERSION", err)
	}
	if err != nil {
		if codeOf(err, 0) == types.ErrPluginNotAvailable {
			return d, &delegateError{Verb: "VERSION", Delegate: d.String(), Err: err}
		}
		if isTimeout(err) && pctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("timed out after %s (delegateTimeout): %w", req.Conf.DelegateTimeout, err)
		}
		return d, types.NewError(types.ErrIncompatibleCNIVersion, BoundText(fmt.Sprintf(
			"%s: cniVersion %q: its VERSION failed, so catena cannot tell which version to call it at (set delegates[%d].cniVersion by hand): %s",
			d, AutoVersion, d.Index, msgOf(err))), "")
	}
	v, err := Negotiate(p.Supported)
	if err != nil {
		return d, types.NewError(types.ErrIncompatibleCNIVersion, BoundText(fmt.Sprintf(
			"%s: cniVersion %q: the VERSION of %s: %v (set delegates[%d].cniVersion by hand)", d, AutoVersion, p.Binary, err, d.Index)), "")
	}
	d.CNIVersion, d.probed = v, &p
	return d, nil
}

// Negotiate returns the highest version both in supported (a VERSION
// answer) and in what Catena converts results to and from (version.All).
// An answer listing something that is not a version is refused: it lies
// or is broken, and nothing it says can be trusted.
func Negotiate(supported []string) (string, error) {
	if len(supported) == 0 {
		return "", errors.New("it answered no supportedVersions")
	}
	ours := version.All.SupportedVersions()
	best := ""
	for _, v := range supported {
		if _, _, _, err := version.ParseVersion(v); err != nil || v == "" {
			return "", fmt.Errorf("it answered %q among its supportedVersions, which is not a CNI version", BoundText(v))
		}
		if !slices.Contains(ours, v) {
			continue // a version newer than catena's, or never released
		}
		if gt, err := version.GreaterThan(v, best); best == "" || (err == nil && gt) {
			best = v
		}
	}
	if best == "" {
		return "", fmt.Errorf("it supports %s, none of which catena converts results to and from (%s)",
			BoundText(strings.Join(supported, ", ")), strings.Join(ours, ", "))
	}
	return best, nil
}

// disowned turns a delegate's "incompatible CNI version" (code 1) at the
// version its own VERSION answer chose into an error that says so, and
// drops the cached answer so that the next call asks again. Any other
// error, or one of a delegate whose version was not negotiated, is
// returned as is.
func (e *Engine) disowned(d Delegate, err error) error {
	if err == nil || d.probed == nil || codeOf(err, 0) != types.ErrIncompatibleCNIVersion {
		return err
	}
	if ferr := e.Versions.Forget(d.probed.Binary); ferr != nil {
		e.log().Warn("dropping a cached VERSION answer", "delegate", d.String(), "error", ferr)
	}
	return types.NewError(types.ErrIncompatibleCNIVersion, BoundText(fmt.Sprintf(
		"%s refused version %s, which its VERSION (%s) claims (supportedVersions %s): the binary does not support what it claims; set delegates[%d].cniVersion by hand: %s",
		d.Type, d.CNIVersion, d.probed.Binary, strings.Join(d.probed.Supported, ", "), d.Index, msgOf(err))), "")
}
