package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/catena-cni/catena/cmd/internal/cli"
	"github.com/catena-cni/catena/node/agent"
	"github.com/catena-cni/catena/node/nodeconf"
	"github.com/catena-cni/catena/node/selfwatch"
)

type selfWatchFlags struct {
	target string
	// namespace and name are target's, once validate parsed it
	namespace, name string
}

func (f *selfWatchFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.target, "uninstall-on-delete", "",
		`<namespace>/<daemonset>: the agent's own DaemonSet; when it is deleted (helm uninstall, kubectl delete), the agent removes the generated conflist as it exits and the primary takes over (catena stays in the bin dir); a rollout, a drain or any doubt leaves it ("": never; in a cluster only)`)
}

// validate checks the flag's form before anything runs.
func (f *selfWatchFlags) validate() error {
	if f.target == "" {
		return nil
	}
	var err error
	if f.namespace, f.name, err = selfwatch.ParseTarget(f.target); err != nil {
		return &cli.UsageError{Err: fmt.Errorf("--uninstall-on-delete %w", err)}
	}
	return nil
}

// setup, after validate, watches the DaemonSet and makes inst ask it as
// the agent stops; nothing outside a cluster (logged: the conflist then
// always stays).
func (f *selfWatchFlags) setup(cfg *rest.Config, inst *nodeconf.Installer, log *slog.Logger) []agent.Named {
	if f.target == "" {
		return nil
	}
	if cfg == nil {
		log.Warn("--uninstall-on-delete: not in a cluster; the generated conflist stays when the agent stops")
		return nil
	}
	// No client timeout: it would cut the watch every time.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Warn("--uninstall-on-delete: no client for the API server; the generated conflist stays when the agent stops", "error", err)
		return nil
	}
	w := &selfwatch.Watch{Client: cs, Namespace: f.namespace, Name: f.name, Log: log}
	inst.Leaving = func() (bool, string) { return w.Gone(context.Background()) }
	return []agent.Named{{Name: "selfwatch", Runnable: agent.RunnableFunc(w.Run)}}
}
