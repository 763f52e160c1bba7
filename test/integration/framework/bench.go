package framework

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// StartKubeScheduler starts the stock kube-scheduler on a running cluster
// (for side-by-side measurements that must not count its start-up against
// the pods created before it).
func (c *Cluster) StartKubeScheduler() error {
	c.mu.Lock()
	_, running := c.procs[KubeScheduler]
	c.mu.Unlock()
	if running {
		return fmt.Errorf("kube-scheduler already runs")
	}
	return c.startScheduler()
}

// PeakRSS returns the peak resident memory of a component's process in bytes
// (VmHWM of /proc/<pid>/status; Linux only).
func (c *Cluster) PeakRSS(component string) (int64, error) {
	c.mu.Lock()
	p, ok := c.procs[component]
	c.mu.Unlock()
	if !ok || p.cmd.Process == nil {
		return 0, fmt.Errorf("%s is not running", component)
	}
	return PeakRSSOf(p.cmd.Process.Pid)
}

// PeakRSSOf is the peak resident memory of any process, in bytes.
func PeakRSSOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, err := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
