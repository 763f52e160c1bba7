//go:build unix

package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// Chaos tests: faults of the control plane while gangs are being bound.
// After each: no node over-committed, no gang left partly bound, every pod
// runs, and corral recovered without a restart. Each logs its recovery
// time (docs/kubernetes.md#faults-of-the-control-plane).

// listPods lists a namespace's pods, tolerating an API server that is away.
func listPods(c *framework.Cluster, ns string) ([]corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// gangsBound counts, per gang (label app), pods and bound pods.
func gangsBound(pods []corev1.Pod) (sizes, bound map[string]int) {
	sizes, bound = map[string]int{}, map[string]int{}
	for _, p := range pods {
		app := p.Labels["app"]
		sizes[app]++
		if p.Spec.NodeName != "" {
			bound[app]++
		}
	}
	return sizes, bound
}

// waitAllBound waits until every pod of ns is bound and returns when.
func waitAllBound(t *testing.T, c *framework.Cluster, ns string, timeout time.Duration) time.Time {
	t.Helper()
	eventually(t, timeout, "every gang bound", func() (bool, string) {
		pods, err := listPods(c, ns)
		if err != nil {
			return false, err.Error()
		}
		sizes, bound := gangsBound(pods)
		var short []string
		for g, n := range sizes {
			if bound[g] < n {
				short = append(short, fmt.Sprintf("%s %d/%d", g, bound[g], n))
			}
		}
		return len(short) == 0, strings.Join(short, ", ")
	})
	return time.Now()
}

// checkAfterChaos checks the invariants every chaos test ends on.
func checkAfterChaos(t *testing.T, c *framework.Cluster, ns string) {
	t.Helper()
	checkNoGPUSharedTwice(t, c)
	ctx := context.Background()
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := c.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]int64{}
	for _, p := range all.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			if q, ok := ctr.Resources.Limits["nvidia.com/gpu"]; ok {
				used[p.Spec.NodeName] += q.Value()
			}
		}
	}
	for _, n := range nodes.Items {
		cap := n.Status.Allocatable["nvidia.com/gpu"]
		if used[n.Name] > cap.Value() {
			t.Errorf("node %s over-committed: %d GPUs bound, %d allocatable", n.Name, used[n.Name], cap.Value())
		}
	}
	pods, err := listPods(c, ns)
	if err != nil {
		t.Fatal(err)
	}
	sizes, bound := gangsBound(pods)
	for g, n := range sizes {
		if bound[g] != 0 && bound[g] != n {
			t.Errorf("gang %s left partly bound: %d of %d", g, bound[g], n)
		}
	}
	eventually(t, 60*time.Second, "every pod running", func() (bool, string) {
		pods, err := listPods(c, ns)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods {
			if p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("%s is %s", p.Name, p.Status.Phase)
			}
		}
		return true, ""
	})
}

func mustList(t *testing.T, c *framework.Cluster, ns string) []corev1.Pod {
	t.Helper()
	pods, err := listPods(c, ns)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// checkGangsInOneRack: a gang completed after a cut-off is still in the
// rack the engine chose for it (each gang fits one rack).
func checkGangsInOneRack(t *testing.T, c *framework.Cluster, ns string) {
	t.Helper()
	racks := map[string]map[string]bool{}
	for _, p := range mustList(t, c, ns) {
		if p.Spec.NodeName == "" {
			continue
		}
		rack, _, _ := strings.Cut(p.Spec.NodeName, "-")
		if racks[p.Labels["app"]] == nil {
			racks[p.Labels["app"]] = map[string]bool{}
		}
		racks[p.Labels["app"]][rack] = true
	}
	for g, rs := range racks {
		if len(rs) != 1 {
			t.Errorf("gang %s spread over racks %v after its completion", g, rs)
		}
	}
}

// TestChaosAPIServerKilledMidBind: kube-apiserver is SIGKILLed while a
// gang is half bound and restarted 3 s later on the same etcd.
func TestChaosAPIServerKilledMidBind(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 2, 4)
	ns := kit.Namespace(t, c, "apikill-")
	for i := 0; i < 6; i++ {
		createGangPod(t, c, ns, "big", i, 8)
	}
	startCorralWith(t, c, kube.Options{BindDelay: 400 * time.Millisecond})
	eventually(t, 60*time.Second, "the gang partly bound", func() (bool, string) {
		n := boundCount(mustList(t, c, ns))
		return n >= 2 && n < 6, fmt.Sprintf("%d bound", n)
	})
	ready, err := c.RestartAPIServer(context.Background(), syscall.SIGKILL, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	done := waitAllBound(t, c, ns, 90*time.Second)
	t.Logf("RECOVERY apiserver-sigkill: gang whole %.2fs after kube-apiserver was ready again", done.Sub(ready).Seconds())
	checkAfterChaos(t, c, ns)
}

// TestChaosEtcdPaused: etcd is frozen (SIGSTOP) for 5 s while a gang is
// half bound.
func TestChaosEtcdPaused(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 2, 4)
	ns := kit.Namespace(t, c, "etcdpause-")
	for i := 0; i < 6; i++ {
		createGangPod(t, c, ns, "big", i, 8)
	}
	startCorralWith(t, c, kube.Options{BindDelay: 400 * time.Millisecond})
	eventually(t, 60*time.Second, "the gang partly bound", func() (bool, string) {
		n := boundCount(mustList(t, c, ns))
		return n >= 2 && n < 6, fmt.Sprintf("%d bound", n)
	})
	if err := c.Pause(framework.Etcd); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second)
	if err := c.Resume(framework.Etcd); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	done := waitAllBound(t, c, ns, 90*time.Second)
	t.Logf("RECOVERY etcd-sigstop: gang whole %.2fs after etcd resumed", done.Sub(resumed).Seconds())
	checkAfterChaos(t, c, ns)
}

// TestChaosStaleLeaderWritesNothing: of two replicas, the leader is
// paused mid-gang past its Lease; the other takes over and finishes the
// gang; the old leader, resumed, must write nothing.
func TestChaosStaleLeaderWritesNothing(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 2, 4)
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "corral-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := kit.Namespace(t, c, "stale-")
	// A retry period long beside a renewal makes the pause land, most
	// likely, between two renewals: the resumed leader then still believes
	// it leads for a renew deadline (3 s) while client-go retries, which is
	// when an unfenced leader writes.
	le := []string{"--leader-elect=true", "--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s",
		"--leader-elect-retry-period", "1s", "--debug-bind-delay", "700ms", "--log-level", "debug"}
	procs := map[string]*corralProc{
		"replica-1": startCorralProcess(t, c, "replica-1", append(le, "--leader-elect-identity", "replica-1")...),
		"replica-2": startCorralProcess(t, c, "replica-2", append(le, "--leader-elect-identity", "replica-2")...),
	}
	for i := 0; i < 6; i++ {
		createGangPod(t, c, ns, "big", i, 8)
	}
	eventually(t, 60*time.Second, "the gang partly bound", func() (bool, string) {
		n := boundCount(mustList(t, c, ns))
		return n >= 1 && n < 6, fmt.Sprintf("%d bound", n)
	})
	lease, err := c.Client.CoordinationV1().Leases("corral-system").Get(context.Background(), "corral-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("lease: %v", err)
	}
	leader := procs[*lease.Spec.HolderIdentity]
	if err := syscall.Kill(-leader.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	eventually(t, 30*time.Second, "the other replica taking the Lease", func() (bool, string) {
		l, err := c.Client.CoordinationV1().Leases("corral-system").Get(context.Background(), "corral-scheduler", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, fmt.Sprint(err)
		}
		return *l.Spec.HolderIdentity != *lease.Spec.HolderIdentity, *l.Spec.HolderIdentity
	})
	// Past the Lease for sure, and mid-gang for the new leader.
	time.Sleep(time.Until(paused.Add(6 * time.Second)))
	before, _ := os.ReadFile(leader.log)
	if err := syscall.Kill(-leader.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	done := waitAllBound(t, c, ns, 60*time.Second)
	t.Logf("RECOVERY stale-leader: gang whole %.2fs after the leader was paused (Lease 4s)", done.Sub(paused).Seconds())
	select {
	case <-leader.done:
	case <-time.After(10 * time.Second):
		t.Error("the old leader is still running 10s after losing the Lease")
	}
	after, _ := os.ReadFile(leader.log)
	tail := string(after[len(before):])
	lines := strings.Split(strings.TrimSpace(string(before)), "\n")
	t.Logf("old leader before its pause (last lines):\n%s", strings.Join(lines[max(0, len(lines)-8):], "\n"))
	t.Logf("old leader after its resume (%.1fs paused):\n%s", resumed.Sub(paused).Seconds(), tail)
	// Every binding write is logged ("binding", debug) as it is sent; a
	// failed one is logged with its error. A write the API server refuses
	// as done already (the new leader bound the pod where the old one
	// planned it) is a write all the same.
	for _, line := range strings.Split(tail, "\n") {
		if strings.Contains(line, `"msg":"binding"`) {
			t.Errorf("the stale leader sent a binding after its resume: %s", line)
		}
		if strings.Contains(line, `"msg":"binding failed"`) && !strings.Contains(line, "not writing") {
			t.Errorf("the stale leader tried a binding after its resume: %s", line)
		}
	}
	// It may also exit (leadership lost) before it reaches its next write.
	t.Logf("the stale leader refused a write: %v", strings.Contains(tail, "not writing"))
	checkAfterChaos(t, c, ns)
}

// TestChaosBurst: a burst of single pods and gangs at once; no binding is
// tried twice and none fails.
func TestChaosBurst(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 3, 8)
	ns := kit.Namespace(t, c, "burst-")
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	create := func(name, gang string, gpus int) {
		defer wg.Done()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": gang}},
			Spec: kit.GPUPodSpec(gpus)}
		if gang != name {
			p.Annotations = map[string]string{"corral.dev/gang": gang}
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			errs <- err
		}
	}
	// 20 gangs of 4 × 1 GPU and 100 single 1-GPU pods: 180 of 192 GPUs.
	for g := 0; g < 20; g++ {
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go create(fmt.Sprintf("g%d-%d", g, i), fmt.Sprintf("g%d", g), 1)
		}
	}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go create(fmt.Sprintf("solo-%d", i), fmt.Sprintf("solo-%d", i), 1)
	}
	start := time.Now()
	reg := prometheus.NewRegistry()
	startCorralWith(t, c, kube.Options{Registry: reg})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	done := waitAllBound(t, c, ns, 120*time.Second)
	t.Logf("RECOVERY burst: 180 pods bound %.2fs after the burst began", done.Sub(start).Seconds())
	got := counters(t, reg)
	t.Logf("binding writes: %v", got)
	for k, v := range got {
		if strings.HasPrefix(k, "corral_binding_write_failures_total") && v > 0 {
			t.Errorf("%s = %v: a binding failed in the burst", k, v)
		}
	}
	checkAfterChaos(t, c, ns)
}

// counters reads corral's binding counters from a registry, by name and
// labels.
func counters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "corral_binding_write") {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			out[key] = m.GetCounter().GetValue()
		}
	}
	return out
}
