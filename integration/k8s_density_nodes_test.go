package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/catena-cni/catena/tools/nodebench"
)

// densityNode is what the node-density bench does differently on each
// runtime's node: its primary and the name of its network, and how the
// runtime's own CNI figures are had and checked.
type densityNode interface {
	// names are the variants' names in the tables; base names the files
	names() nodebench.Names
	base() string
	// prepare puts the node on its primary (make bench-node starts the
	// containerd node on another) and checks it holds nothing of it
	prepare(t *testing.T)
	// deployment is the bench's Deployment, at 0, its pods on the node
	deployment() *appsv1.Deployment
	// network is the name of the primary's network, once prepared
	network() string
	// waitClean waits until the node holds nothing of its network
	waitClean(t *testing.T, limit time.Duration)
	// measure starts measuring the runtime's CNI work in a round of n
	// pods; the func it returns, called once the round's pods are gone,
	// waits until the runtime finished tearing each down, checks that it
	// counted each pod, and returns its measures by Measure.ID
	measure(t *testing.T, d *densityRun, n int) func(t *testing.T) map[string]nodebench.Dist
	// checkJournal checks the round's journal of Catena's rounds beyond
	// one ADD and a DEL per pod
	checkJournal(t *testing.T, dists map[string]nodebench.Dist, n int)
}

var (
	_ densityNode = containerdDensity{}
	_ densityNode = crioDensity{}
)

// containerdDensity is the containerd node on flannel's network; the
// runtime's figures are containerd's CNI setup and teardown histograms.
type containerdDensity struct{ r *k8sRun }

func (containerdDensity) names() nodebench.Names {
	return nodebench.Names{Primary: "flannel", Catena: "Catena over flannel"}
}

func (containerdDensity) base() string { return nodebench.BaseName }

func (c containerdDensity) prepare(t *testing.T) {
	r := c.r
	if r.fl == nil {
		r.newFlannel(t)
		r.writeFlannel(t, fileExists(filepath.Join(r.n.ctd.confDir, generatedName)))
		require.NoError(t, os.Remove(filepath.Join(r.n.ctd.confDir, primaryName)))
	}
	require.Equal(t, flannelHeld{}, r.flannelHeld(t), "the bench starts on an empty node")
}

// deployment is not pinned: the containerd node is the cluster's only one
// while this bench runs.
func (containerdDensity) deployment() *appsv1.Deployment { return webDeployment(densityApp, 0) }

func (c containerdDensity) network() string { return c.r.fl.f.net }

func (c containerdDensity) waitClean(t *testing.T, limit time.Duration) {
	c.r.waitFlannelClean(t, limit)
}

func (c containerdDensity) measure(t *testing.T, d *densityRun, n int) func(t *testing.T) map[string]nodebench.Dist {
	url := c.r.n.containerdMetricsURL()
	s := nodebench.Scrapes{ContainerdBefore: d.scrape(t, url)}
	return func(t *testing.T) map[string]nodebench.Dist {
		// containerd counts a teardown once the CNI DEL returned
		waitFor(t, "containerd counted every CNI teardown", time.Minute, 250*time.Millisecond, func() error {
			h, err := nodebench.HistDelta(s.ContainerdBefore, d.scrape(t, url), nodebench.ContainerdCNIMetric,
				map[string]string{"operation_type": nodebench.ContainerdTearDown})
			if err == nil && h.Count() < float64(n) {
				err = fmt.Errorf("%g teardowns", h.Count())
			}
			return err
		})
		s.ContainerdAfter = d.scrape(t, url)
		dists, err := s.HistDists()
		require.NoError(t, err)
		assert.Equal(t, n, dists[nodebench.CNISetup.ID].Count(), "containerd set up each pod's network once")
		assert.GreaterOrEqual(t, dists[nodebench.CNITeardown.ID].Count(), n, "and tore each down")
		return dists
	}
}

func (containerdDensity) checkJournal(*testing.T, map[string]nodebench.Dist, int) {}

// crioDensity is the CRI-O node on its primary (bridge + host-local,
// portmap, tuning); the runtime's figures are from CRI-O's log
// (nodebench.CRIOLog), and CRI-O CHECKs after every ADD.
type crioDensity struct{ r *k8sRun }

func (crioDensity) names() nodebench.Names {
	return nodebench.Names{Primary: "bridge chain", Catena: "Catena over bridge chain"}
}

func (crioDensity) base() string { return nodebench.CRIOBaseName }

func (c crioDensity) prepare(t *testing.T) {
	c.r.n.waitNetworkWithout(t, "catena")
	c.waitClean(t, time.Minute)
}

func (c crioDensity) deployment() *appsv1.Deployment { return c.r.webDeployment(densityApp, 0) }

func (c crioDensity) network() string { return c.r.n.net }

func (c crioDensity) waitClean(t *testing.T, limit time.Duration) { c.r.n.waitClean(t, limit) }

func (c crioDensity) measure(t *testing.T, _ *densityRun, n int) func(t *testing.T) map[string]nodebench.Dist {
	path := c.r.n.crio.logPath
	info, err := os.Stat(path)
	require.NoError(t, err)
	from := info.Size()
	read := func() *nodebench.CRIOLog {
		f, err := os.Open(path)
		require.NoError(t, err)
		defer func() { _ = f.Close() }()
		_, err = f.Seek(from, io.SeekStart)
		require.NoError(t, err)
		raw, err := io.ReadAll(f)
		require.NoError(t, err)
		l := nodebench.NewCRIOLog(densityApp + "-")
		require.NoError(t, l.Read(bytes.NewReader(raw)), path)
		return l
	}
	return func(t *testing.T) map[string]nodebench.Dist {
		var l *nodebench.CRIOLog
		waitFor(t, "CRI-O logged every sandbox of the round stopped", time.Minute, 250*time.Millisecond, func() error {
			if l = read(); l.Pods() < n || len(l.Unstopped()) > 0 {
				return fmt.Errorf("%d pods logged, sandboxes not stopped: %v", l.Pods(), l.Unstopped())
			}
			return nil
		}, c.r.n.kubelet)
		dists := l.Dists()
		for _, m := range []nodebench.Measure{nodebench.CRIOAdd, nodebench.CRIORunSandbox, nodebench.CRIOStopSandbox} {
			assert.Equal(t, n, dists[m.ID].Count(), "CRI-O logged both ends of each pod's %s", m.Label)
		}
		return dists
	}
}

func (crioDensity) checkJournal(t *testing.T, dists map[string]nodebench.Dist, n int) {
	assert.GreaterOrEqual(t, dists[nodebench.CatenaCheck.ID].Count(), n, "CRI-O CHECKs each pod after its ADD")
}
