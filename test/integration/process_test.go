package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/api/v1alpha1"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

var (
	buildOnce sync.Once
	corralBin string
	buildErr  error
)

// corralBinary builds cmd/corral once per test binary.
func corralBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := framework.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "corral-bin-")
		if err != nil {
			buildErr = err
			return
		}
		corralBin = filepath.Join(dir, "corral")
		cmd := exec.Command("go", "build", "-o", corralBin, "./cmd/corral")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return corralBin
}

// corralProc is a `corral scheduler` child process.
type corralProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startCorralProcess runs `corral scheduler` against the cluster with extra
// flags; the process is killed when the test ends.
func startCorralProcess(t *testing.T, c *framework.Cluster, name string, args ...string) *corralProc {
	t.Helper()
	bin := corralBinary(t)
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]string{"scheduler", "--kubeconfig", c.Kubeconfig, "--metrics-address", "", "--health-address", "",
		"--cycle-interval", "200ms"}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &corralProc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); f.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				if len(lines) > 40 {
					lines = lines[len(lines)-40:]
				}
				t.Logf("%s log (last lines):\n%s", name, strings.Join(lines, "\n"))
			}
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to go.
func (p *corralProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

// checkNoGPUSharedTwice fails if two bound pods on one node name the same GPU.
func checkNoGPUSharedTwice(t *testing.T, c *framework.Cluster) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]string{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		ids := p.Annotations[v1alpha1.AnnotationAssignedGPUs]
		if ids == "" {
			continue
		}
		for _, id := range strings.Split(ids, ",") {
			key := p.Spec.NodeName + "/" + id
			if prev, ok := owner[key]; ok {
				t.Errorf("GPU %s given to both %s and %s", key, prev, p.Name)
			}
			owner[key] = p.Name
		}
	}
}

func TestRestartMidGangLosesNothing(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 2, 4)
	ns := kit.Namespace(t, c, "restart-")
	// A gang of six 4-GPU pods, bound one by one with a pause in between.
	for i := 0; i < 6; i++ {
		createGangPod(t, c, ns, "big", i, 4)
	}
	first := startCorralProcess(t, c, "corral-1", "--leader-elect=false", "--debug-bind-delay", "700ms")
	eventually(t, 60*time.Second, "the gang partly bound", func() (bool, string) {
		n := boundCount(podsOf(t, c, ns, "big"))
		return n >= 2 && n < 6, fmt.Sprintf("%d bound", n)
	})
	first.kill()
	partial := boundCount(podsOf(t, c, ns, "big"))
	if partial == 6 {
		t.Fatalf("the whole gang bound before the kill; the test needs a longer bind delay")
	}
	t.Logf("killed corral with %d of 6 pods bound", partial)

	startCorralProcess(t, c, "corral-2", "--leader-elect=false")
	eventually(t, 60*time.Second, "the gang fully bound after the restart", func() (bool, string) {
		n := boundCount(podsOf(t, c, ns, "big"))
		return n == 6, fmt.Sprintf("%d bound", n)
	})
	// More work after the restart must not land on GPUs the gang holds.
	for i := 0; i < 4; i++ {
		createGangPod(t, c, ns, "more", i, 4)
	}
	eventually(t, 60*time.Second, "the second gang bound", func() (bool, string) {
		n := boundCount(podsOf(t, c, ns, "more"))
		return n == 4, fmt.Sprintf("%d bound", n)
	})
	checkNoGPUSharedTwice(t, c)
}

func TestLeaderFailover(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.AddRacks(t, c, 1, 2)
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "corral-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := kit.Namespace(t, c, "leader-")
	le := []string{"--leader-elect=true", "--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s",
		"--leader-elect-retry-period", "500ms"}
	procs := map[string]*corralProc{
		"replica-1": startCorralProcess(t, c, "replica-1", append(le, "--leader-elect-identity", "replica-1")...),
		"replica-2": startCorralProcess(t, c, "replica-2", append(le, "--leader-elect-identity", "replica-2")...),
	}
	createGangPod(t, c, ns, "first", 0, 1)
	eventually(t, 60*time.Second, "the first pod bound by the leader", func() (bool, string) {
		n := boundCount(podsOf(t, c, ns, "first"))
		return n == 1, fmt.Sprintf("%d bound", n)
	})
	lease, err := c.Client.CoordinationV1().Leases("corral-system").Get(context.Background(), "corral-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil {
		t.Fatalf("lease: %v %+v", err, lease)
	}
	leader := *lease.Spec.HolderIdentity
	standby := "replica-1"
	if leader == "replica-1" {
		standby = "replica-2"
	}
	t.Logf("leader %s; killing it", leader)
	killed := time.Now()
	procs[leader].kill()

	createGangPod(t, c, ns, "second", 0, 1)
	eventually(t, 30*time.Second, "the stand-by takes over and binds", func() (bool, string) {
		n := boundCount(podsOf(t, c, ns, "second"))
		return n == 1, fmt.Sprintf("%d bound", n)
	})
	t.Logf("pod bound %.1fs after the leader was killed", time.Since(killed).Seconds())
	lease, err = c.Client.CoordinationV1().Leases("corral-system").Get(context.Background(), "corral-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != standby {
		t.Errorf("lease holder after failover: %v, want %s", lease.Spec.HolderIdentity, standby)
	}
}
