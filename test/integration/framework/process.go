package framework

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one control-plane component running in its own process group,
// with stdout and stderr going to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string

	done    chan struct{} // closed when the process has exited
	waitErr error         // valid after done is closed
	stopped bool          // set before we signal it, so exits are "expected"
	mu      sync.Mutex
}

// spawner starts processes from one goroutine locked to its OS thread.
//
// On Linux every child gets Pdeathsig=SIGKILL so that a crashed or timed-out
// test binary does not leave etcd and kube-apiserver behind. Pdeathsig fires
// when the *thread* that forked the child exits, not the process (see
// golang/go#27505); the Go runtime can retire threads, so starting children
// from a thread that stays alive for the lifetime of the cluster is what makes
// Pdeathsig safe to use. When the cluster is stopped the goroutine returns
// while still locked, the runtime terminates that thread, and any child that
// somehow survived Stop is killed by the kernel.
type spawner struct {
	reqs chan spawnReq
	quit chan struct{}
	once sync.Once
}

type spawnReq struct {
	cmd  *exec.Cmd
	resp chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), quit: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		// Deliberately no UnlockOSThread: see the type comment.
		for {
			select {
			case r := <-s.reqs:
				r.resp <- r.cmd.Start()
			case <-s.quit:
				return
			}
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	resp := make(chan error, 1)
	select {
	case s.reqs <- spawnReq{cmd: cmd, resp: resp}:
	case <-s.quit:
		return errors.New("cluster is stopped")
	}
	return <-resp
}

func (s *spawner) close() { s.once.Do(func() { close(s.quit) }) }

// startProcess starts bin with args, logging to logPath (appended to, so a
// retried start keeps the earlier attempt's output).
func startProcess(sp *spawner, name, bin string, args []string, env []string, workDir, logPath string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "==> %s %s\n", time.Now().Format(time.RFC3339Nano), shellQuote(append([]string{bin}, args...)))

	cmd := exec.Command(bin, args...)
	cmd.Dir = workDir
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Stdin = nil
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr()

	if err := sp.start(cmd); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has terminated, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.waitErr
	default:
		return false, nil
	}
}

// unexpectedExit reports an exit that did not come from stop().
func (p *process) unexpectedExit() (bool, error) {
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		return false, nil
	}
	return p.exited()
}

// signal sends sig to the process group (SIGTERM first, so klog flushes).
func (p *process) signal(sig syscall.Signal) {
	if p.cmd.Process == nil {
		return
	}
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	signalGroup(p.cmd.Process, sig)
}

// wait waits at most d for the process to exit.
func (p *process) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

// stopProcesses terminates ps concurrently: SIGTERM, then SIGKILL after grace.
// It never blocks for more than grace+5s.
func stopProcesses(ps []*process, grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range ps {
		if p == nil {
			continue
		}
		if done, _ := p.exited(); done {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.signal(syscall.SIGTERM)
			if p.wait(grace) {
				return
			}
			p.signal(syscall.SIGKILL)
			p.wait(5 * time.Second)
		}()
	}
	wg.Wait()
}

// freePort asks the kernel for a free TCP port on 127.0.0.1. There is a small
// window in which somebody else can take it; callers retry on "address
// already in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailFile returns the last n lines of path (reading at most the last 1 MiB).
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const max = 1 << 20
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	b = bytes.TrimRight(b, "\n")
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func fileContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte(s))
}

func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$*?[]{}()<>|&;#~`") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
