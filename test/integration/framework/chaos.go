//go:build unix

package framework

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"syscall"
	"time"
)

// Faults of the control plane for chaos tests: a component killed and
// restarted, or paused and resumed, while the rest of the cluster runs.

// RestartAPIServer stops kube-apiserver with sig (SIGKILL for a crash,
// SIGTERM for a clean stop), leaves it down for down, and starts it again
// with the same flags, port and etcd, so that clients reconnect to the
// same address. It returns once /readyz answers again, with the moment it
// did.
func (c *Cluster) RestartAPIServer(ctx context.Context, sig syscall.Signal, down time.Duration) (time.Time, error) {
	c.mu.Lock()
	old := c.procs[KubeAPIServer]
	args := c.apiArgs
	c.mu.Unlock()
	if old == nil || len(args) == 0 {
		return time.Time{}, fmt.Errorf("kube-apiserver is not running")
	}
	old.signal(sig)
	if !old.wait(15 * time.Second) {
		old.signal(syscall.SIGKILL)
		old.wait(5 * time.Second)
	}
	select {
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(down):
	}
	var lastErr error
	// The port may linger a moment after a crash: retry the start.
	for attempt := 1; attempt <= 5; attempt++ {
		p, err := startProcess(c.spawner, KubeAPIServer, c.bins.apiserver, args, nil, c.Dir, c.LogFile(KubeAPIServer))
		if err != nil {
			return time.Time{}, err
		}
		c.addProcess(p)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(c.pki.caPEM)
		lastErr = waitHTTP(ctx, p, 60*time.Second, func(hc *http.Client) (bool, string) {
			return probe(hc, c.Host+"/readyz", c.adminToken, "ok")
		}, pool)
		if lastErr == nil {
			return time.Now(), nil
		}
		stopProcesses([]*process{p}, 2*time.Second)
		if !fileContains(p.logPath, "address already in use") {
			break
		}
		time.Sleep(time.Second)
	}
	return time.Time{}, fmt.Errorf("kube-apiserver did not come back: %w", lastErr)
}

// Pause stops a component (SIGSTOP) without ending it: its connections
// stay open and unanswered, as with a frozen machine.
func (c *Cluster) Pause(component string) error { return c.sendSignal(component, syscall.SIGSTOP) }

// Resume continues a paused component (SIGCONT).
func (c *Cluster) Resume(component string) error { return c.sendSignal(component, syscall.SIGCONT) }

func (c *Cluster) sendSignal(component string, sig syscall.Signal) error {
	c.mu.Lock()
	p := c.procs[component]
	c.mu.Unlock()
	if p == nil || p.cmd.Process == nil {
		return fmt.Errorf("%s is not running", component)
	}
	if done, _ := p.exited(); done {
		return fmt.Errorf("%s has exited", component)
	}
	// Not p.signal: a paused component is not being stopped, and its exit
	// would still be unexpected.
	signalGroup(p.cmd.Process, sig)
	return nil
}
