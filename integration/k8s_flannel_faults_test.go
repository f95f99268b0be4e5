package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// flannelSeedFailure is the seed failure on flannel through Catena: failer
// after flannel fails ADD and DEL under kubelet's retries. Catena's
// rollback reaches flannel's DEL each time: 0 IPs and 0 files in
// flannel's cache dir (plain flannel held one of each per retry). Once the
// fault is lifted the pod starts, and once it is deleted nothing is left.
func (r *k8sRun) flannelSeedFailure(t *testing.T) {
	logFile := filepath.Join(r.n.dir, "failer-flannel-catena.log")
	r.writeFlannel(t, true, r.faultyFlannel(logFile))
	r.flannelRetry(t, "fseed")
	held := r.flannelQuiet(t)
	retries := failerAdds(t, logFile)
	assert.GreaterOrEqual(t, retries, 3, "kubelet retried every 10-15 s")
	assert.Equal(t, flannelHeld{}, held, "Catena holds nothing of the failed attempts, nor does flannel")

	require.NoError(t, os.Remove(r.fl.fault))
	r.waitRunning(t, "fseed", 1)
	assert.Equal(t, flannelHeld{IPs: 1, Veths: 1, Files: 1, Records: 1}, r.flannelHeld(t))
	r.writeFlannel(t, true)
	r.c.kubectl(t, nil, "delete", "deployment", "fseed", "-n", "default")
	r.waitGone(t, "fseed")
	r.waitFlannelClean(t, time.Minute)
	summary("flannel seed failure", "%s of kubelet retries, failer after flannel failing ADD and DEL: plain flannel %d retries, %d IPs and %d flannel files held; Catena %d retries, %s; pod Running once lifted; deleted: %s",
		retryWindow, r.fl.plain.retries, r.fl.plain.held.IPs, r.fl.plain.held.Files, retries, held, r.flannelHeld(t))
}

// flannelCrash kills catena (SIGKILL) between flannel's ADD and the next
// delegate's, under kubelet: failer after flannel waits for a file, and
// catena is killed while it waits (flannel's file written, the IP
// allocated). Kubelet's RunPodSandbox fails, containerd's DEL reaches
// Catena, which tears flannel's ADD down from its record: nothing of the
// killed attempt is left. The retry then runs, and the pod's deletion
// leaves nothing.
func (r *k8sRun) flannelCrash(t *testing.T) {
	proceed, logFile := filepath.Join(r.n.dir, "flannel-proceed"), filepath.Join(r.n.dir, "failer-flannel-crash.log")
	r.writeFlannel(t, true, failer(fmt.Sprintf(`"waitFile":%q,"waitTimeout":"100s","logFile":%q`, proceed, logFile)))
	r.c.apply(t, []any{webDeployment("fcrash", 1)})
	var cid string
	waitFor(t, "the delegate after flannel runs", 2*time.Minute, 50*time.Millisecond, func() error {
		if cid = firstAdd(t, logFile); cid == "" {
			return fmt.Errorf("no ADD in %s yet", logFile)
		}
		return nil
	}, r.n.kubelet)
	fl := r.flannel(t)
	require.Contains(t, fl.cacheFiles(), cid, "flannel's ADD wrote its file")
	require.Contains(t, fl.ipHolders(), cid, "and the IP is allocated")
	killed := pluginProc(t, cid, "catena")
	require.NoError(t, syscall.Kill(killed, syscall.SIGKILL))
	touch(t, proceed) // the retry goes through
	released := waitFor(t, "containerd's DEL released the killed attempt", 2*time.Minute, 100*time.Millisecond, func() error {
		if slices.Contains(fl.cacheFiles(), cid) || slices.Contains(fl.ipHolders(), cid) || fileExists(filepath.Join(r.n.cacheDir(), "records", fl.net, cid+":eth0.json")) {
			return fmt.Errorf("%s still holds: %s", cid, r.flannelHeld(t))
		}
		return nil
	}, r.n.kubelet)
	requireNoPluginProcs(t, cid, "after catena was killed")
	dels := opsFor(r.n.ops(t), "DEL", cid)
	require.NotEmpty(t, dels)
	assert.Equal(t, "ok", dels[0].Outcome, "%+v", dels[0])
	assert.Equal(t, []string{"failer DEL", "flannel DEL"}, callNames(dels[0]), "the DEL tore down what the record held")

	r.waitRunning(t, "fcrash", 1)
	assert.Equal(t, flannelHeld{IPs: 1, Veths: 1, Files: 1, Records: 1}, r.flannelHeld(t), "the retry's, and nothing of the killed one")
	r.writeFlannel(t, true)
	r.c.kubectl(t, nil, "delete", "deployment", "fcrash", "-n", "default")
	r.waitGone(t, "fcrash")
	r.waitFlannelClean(t, time.Minute)
	summary("flannel crash", "catena killed (SIGKILL) after flannel's ADD, the next delegate running: containerd's DEL through Catena (%s) released the IP, flannel's file and the record in %s; the retry Running; deleted: %s",
		strings.Join(callNames(dels[0]), ", "), released.Round(time.Millisecond), r.flannelHeld(t))
}

// flannelReconciler wipes containerd's state with 2 flannel pods running
// through Catena; kubelet recreates them, and the agent reclaims the lost
// sandboxes from its container: flannel's DEL, from its cache file,
// releases their IPs. IPs and flannel's files settle at one per pod.
func (r *k8sRun) flannelReconciler(t *testing.T) {
	r.c.apply(t, []any{webDeployment("fweb", 2)})
	before := r.waitRunning(t, "fweb", 2)
	lost := r.flannel(t).cacheFiles()
	require.Equal(t, flannelHeld{IPs: 2, Veths: 2, Files: 2, Records: 2}, r.flannelHeld(t))

	start := time.Now()
	after := r.wipeUnderPods(t, before, "fweb")
	peak := r.flannelHeld(t)
	r.waitAgentReady(t, r.tag)
	waitFor(t, "flannel's IPs and files settle at one per pod", 4*time.Minute, time.Second, func() error {
		files := r.flannel(t).cacheFiles()
		for _, id := range lost {
			if slices.Contains(files, id) {
				return fmt.Errorf("lost sandbox %s's file is still there: %s", id, r.flannelHeld(t))
			}
		}
		if h := r.flannelHeld(t); h != (flannelHeld{IPs: 2, Veths: 2, Files: 2, Records: 2}) {
			return fmt.Errorf("%s", h)
		}
		return nil
	}, r.n.kubelet)
	settled := time.Since(start)
	reclaims := r.n.reclaimsOf(t, lost, len(lost))
	for _, op := range reclaims {
		assert.Equal(t, "ok", op.Outcome, "%+v", op)
		assert.Equal(t, []string{"portmap DEL", "flannel DEL"}, callNames(op))
	}
	assert.Len(t, reclaims, len(lost), "each lost attachment reclaimed once, by the agent")
	assert.ElementsMatch(t, after, r.flannel(t).ips())
	for _, id := range lost { // the runtime's entries, which containerd forgot
		if err := os.Remove(filepath.Join(libcniResults, r.fl.f.net+"-"+id+"-eth0")); !os.IsNotExist(err) {
			require.NoError(t, err)
		}
	}
	r.c.kubectl(t, nil, "delete", "deployment", "fweb", "-n", "default")
	r.waitGone(t, "fweb")
	r.waitFlannelClean(t, time.Minute)
	summary("flannel reconciler", "containerd wiped with 2 flannel pods: recreated, peak %s; settled at one per pod %s after the wipe by %d RECLAIMs (portmap, flannel DEL) from the agent's container (10 s passes, 30 s grace); deleted: %s",
		peak, settled.Round(time.Second), len(reclaims), r.flannelHeld(t))
}

// flannelSubnetEnvMissing removes subnet.env (flanneld gone) with 2 pods
// running through Catena: a new pod fails with flannel's message naming
// the file and what to do, in kubelet's event, and leaves nothing; the
// generated conflist is neither removed nor rewritten; the agent stays
// Ready; the running pods keep their IPs and answer pings. With subnet.env
// back the new pod starts; deleting all leaves nothing.
func (r *k8sRun) flannelSubnetEnvMissing(t *testing.T) {
	fl := r.flannel(t)
	r.c.apply(t, []any{webDeployment("fweb", 2)})
	ips := r.waitRunning(t, "fweb", 2)
	two := flannelHeld{IPs: 2, Veths: 2, Files: 2, Records: 2}
	require.Equal(t, two, r.flannelHeld(t))
	genPath := filepath.Join(r.n.ctd.confDir, generatedName)
	gen, err := os.ReadFile(genPath)
	require.NoError(t, err)
	genIno := inode(t, genPath)
	good, err := os.ReadFile(fl.subnetFile)
	require.NoError(t, err)

	require.NoError(t, os.Remove(fl.subnetFile))
	since := time.Now()
	r.c.apply(t, []any{webDeployment("fnew", 1)})
	var msg string
	waitFor(t, "kubelet's event says why fnew cannot start", 2*time.Minute, time.Second, func() error {
		msg = r.c.sandboxFailure(t, "fnew")
		if !strings.Contains(msg, fl.subnetFile) {
			return fmt.Errorf("no FailedCreatePodSandBox event naming %s yet (%q)", fl.subnetFile, msg)
		}
		return nil
	}, r.n.kubelet)
	for _, want := range []string{"no such file or directory", "Check the flannel pod log for this node", "delegate 0 (flannel) ADD failed", "rolled back"} {
		assert.Contains(t, msg, want)
	}
	time.Sleep(30 * time.Second) // kubelet retries meanwhile
	failed := 0
	for _, op := range r.n.opsSince(t, since) {
		if op.Verb == "ADD" && op.Outcome == "error" && strings.Contains(op.Attachment, fl.net) {
			failed++
		}
	}
	held := r.flannelQuiet(t)
	assert.Equal(t, two, held, "the failed ADDs left nothing")
	assert.ElementsMatch(t, ips, r.waitRunning(t, "fweb", 2), "the running pods keep their IPs")
	for _, ip := range ips {
		assert.NoError(t, ping(ip, 5*time.Second), "the running pod %s answers", ip)
	}
	now, err := os.ReadFile(genPath)
	require.NoError(t, err)
	assert.Equal(t, string(gen), string(now), "the generated conflist is untouched")
	assert.Equal(t, genIno, inode(t, genPath), "and was not rewritten")
	r.waitAgentReady(t, r.tag)

	fl.writeSubnetEnv(string(good))
	back := time.Now()
	r.waitRunning(t, "fnew", 1)
	started := time.Since(back)
	r.c.kubectl(t, nil, "delete", "deployment", "fweb", "fnew", "-n", "default")
	r.waitGone(t, "fweb")
	r.waitGone(t, "fnew")
	r.waitFlannelClean(t, time.Minute)
	summary("flannel subnet.env", "subnet.env removed with 2 pods running: %d failed ADDs in %s, kubelet's event %q; held %s; generated conflist untouched, agent Ready, 2 pods answer pings; subnet.env back: Running in %s; deleted: %s",
		failed, back.Sub(since).Round(time.Second), eventTail(msg, fl.subnetFile), held, started.Round(time.Millisecond), r.flannelHeld(t))
}

// sandboxFailure is the message of the latest FailedCreatePodSandBox event
// of a pod of Deployment app ("" if none).
func (c *k8sCluster) sandboxFailure(t *testing.T, app string) string {
	t.Helper()
	var list corev1.EventList
	require.NoError(t, c.getJSON(&list, "events", "-n", "default", "--field-selector", "reason=FailedCreatePodSandBox"))
	msg := ""
	for _, e := range list.Items {
		if strings.HasPrefix(e.InvolvedObject.Name, app+"-") {
			msg = e.Message
		}
	}
	return msg
}

// eventTail is an event's message from the path on.
func eventTail(msg, path string) string {
	if i := strings.Index(msg, path); i >= 0 {
		return "..." + msg[i:]
	}
	return msg
}
