package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/node/agent"
	"github.com/catena-cni/catena/node/securemetrics"
)

const defaultSecureMetricsPort = 9618

type secureFlags struct {
	port           int
	certDir        string
	nodeIP         string
	trustedProxies []string
}

func (f *secureFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.port, "secure-metrics-port", defaultSecureMetricsPort, "serve /metrics over HTTPS on --node-ip at this port, behind the API server's TokenReview and SubjectAccessReview (0: not; in a cluster only)")
	fl.StringVar(&f.certDir, "secure-metrics-cert-dir", "", "tls.crt and tls.key of the HTTPS endpoint (a mounted kubernetes.io/tls Secret); empty: self-signed at start")
	fl.StringSliceVar(&f.trustedProxies, "secure-metrics-trusted-proxies", nil, "CIDRs of proxies in front of the HTTPS /metrics whose X-Forwarded-For (its last hop not among them) is a request's source for the rate limit, instead of the proxy's address (default: none; only a connection from one of them is believed)")
	fl.StringVar(&f.nodeIP, "node-ip", "", "the node's address for the HTTPS /metrics (the DaemonSet sets it from status.hostIP)")
}

// setup returns the HTTPS /metrics server, or nothing when the port is 0
// or the agent runs outside a cluster (cfg nil).
func (f *secureFlags) setup(cfg *rest.Config, metrics http.Handler, log *slog.Logger) ([]agent.Named, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	if f.port == 0 || cfg == nil {
		return nil, nil
	}
	if f.port < 0 || f.port > 65535 || net.ParseIP(f.nodeIP) == nil {
		return nil, cli.Usagef("--secure-metrics-port %d, --node-ip %q: a port and the node's IP address", f.port, f.nodeIP)
	}
	h, err := securemetrics.Handler(cfg, metrics, log, opts)
	if err != nil {
		return nil, err
	}
	tc, err := securemetrics.TLSConfig(f.certDir, f.nodeIP)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(f.nodeIP, strconv.Itoa(f.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--secure-metrics-port: %w", err)
	}
	log.Info("serving /metrics over HTTPS behind the API server's authorization", "addr", addr, "selfSigned", f.certDir == "")
	return []agent.Named{{Name: "secure-metrics", Runnable: &agent.Server{Listener: tls.NewListener(ln, tc), Handler: h, Log: log}}}, nil
}

// options are the endpoint's Options from the flags; a bad CIDR is a
// usage error, in a cluster or not.
func (f *secureFlags) options() (securemetrics.Options, error) {
	var opts securemetrics.Options
	for _, c := range f.trustedProxies {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return opts, cli.Usagef("--secure-metrics-trusted-proxies %q: not a CIDR: %v", c, err)
		}
		opts.TrustedProxies = append(opts.TrustedProxies, p.Masked())
	}
	return opts, nil
}
