package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corral-dev/corral/internal/kube"
	"github.com/corral-dev/corral/test/integration/framework"
	"github.com/corral-dev/corral/test/integration/kit"
)

// faultKind is a way a binding write fails.
type faultKind string

const (
	faultRefused  faultKind = "connection-refused" // never sent
	faultConflict faultKind = "conflict"           // refused by the server, never applied
	faultTimeout  faultKind = "timeout"            // applied, but the answer is a timeout
	faultServer   faultKind = "server-error"       // never applied, answered 500
)

// bindFaults is a client transport that fails the first binding of every
// pod whose name has the given suffix, in the way its kind says.
type bindFaults struct {
	rt     http.RoundTripper
	kind   faultKind
	suffix string

	mu    sync.Mutex
	done  map[string]bool
	first time.Time // when the first fault was injected
}

func (f *bindFaults) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/binding") {
		return f.rt.RoundTrip(req)
	}
	parts := strings.Split(req.URL.Path, "/") // /api/v1/namespaces/<ns>/pods/<name>/binding
	name := parts[len(parts)-2]
	f.mu.Lock()
	inject := strings.HasSuffix(name, f.suffix) && !f.done[name]
	if inject {
		f.done[name] = true
		if f.first.IsZero() {
			f.first = time.Now()
		}
	}
	f.mu.Unlock()
	if !inject {
		return f.rt.RoundTrip(req)
	}
	status := func(code int, reason, msg string) *http.Response {
		body := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, code)
		return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewBufferString(body)), Request: req}
	}
	switch f.kind {
	case faultRefused:
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	case faultConflict:
		return status(http.StatusConflict, "Conflict", "Operation cannot be fulfilled on pods/binding: injected conflict"), nil
	case faultServer:
		return status(http.StatusInternalServerError, "InternalError", "injected server error"), nil
	case faultTimeout:
		resp, err := f.rt.RoundTrip(req) // the binding lands
		if err == nil {
			resp.Body.Close()
		}
		return status(http.StatusGatewayTimeout, "Timeout", "injected: the answer was lost"), nil
	}
	return f.rt.RoundTrip(req)
}

func (f *bindFaults) firstFault() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

// TestChaosBindWriteFaults: the third binding of every gang fails, once
// per kind of failure, through a client wrapper. Each gang is cut off
// mid-bind, and is completed beside its bound pods.
func TestChaosBindWriteFaults(t *testing.T) {
	c := framework.Start(t, framework.Options{})
	kit.InstallCorralCRDs(t, c)
	kit.CreateTopology(t, c, "rack")
	kit.AddRacks(t, c, 2, 4)
	for _, kind := range []faultKind{faultRefused, faultConflict, faultTimeout, faultServer} {
		t.Run(string(kind), func(t *testing.T) {
			faults := &bindFaults{kind: kind, suffix: "-2", done: map[string]bool{}}
			cfg := rest.CopyConfig(c.RESTConfig)
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { faults.rt = rt; return faults })
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ns := kit.Namespace(t, c, "faults-")
			// Two gangs of four 4-GPU pods: each fits one rack's half.
			for _, g := range []string{"a", "b"} {
				for i := 0; i < 4; i++ {
					createGangPod(t, c, ns, g, i, 4)
				}
			}
			reg := prometheus.NewRegistry()
			_, stop := kit.RunCorral(t, c, client, kube.Options{Registry: reg})
			done := waitAllBound(t, c, ns, 60*time.Second)
			stop()
			if faults.firstFault().IsZero() {
				t.Fatal("no fault was injected")
			}
			t.Logf("RECOVERY %s: every gang bound %.2fs after the first injected fault", kind, done.Sub(faults.firstFault()).Seconds())
			t.Logf("binding writes: %v", counters(t, reg))
			checkAfterChaos(t, c, ns)
			checkGangsInOneRack(t, c, ns)
			for _, p := range mustList(t, c, ns) {
				if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, 30*time.Second, "the pods gone", func() (bool, string) {
				pods, err := listPods(c, ns)
				return err == nil && len(pods) == 0, fmt.Sprint(len(pods), err)
			})
		})
	}
}
