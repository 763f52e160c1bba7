package kube

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderElection configures the Lease that keeps one replica active.
type LeaderElection struct {
	Enabled       bool
	Namespace     string
	LeaseName     string
	Identity      string // "" = hostname + random suffix
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// Fence, when set, learns every successful renewal (fence.go); give
	// the same one to the Scheduler so that it writes only while the
	// Lease is provably held.
	Fence *Fence
}

// RunElected runs fn while this process holds the Lease; with election
// disabled it just runs fn. It returns when ctx ends or leadership is lost:
// a replica that lost the lease must stop scheduling at once, so the caller
// exits and is restarted as a stand-by.
func RunElected(ctx context.Context, client kubernetes.Interface, le LeaderElection, log *slog.Logger, fn func(context.Context)) error {
	if !le.Enabled {
		fn(ctx)
		return nil
	}
	id := le.Identity
	if id == "" {
		host, _ := os.Hostname()
		id = host + "-" + string(uuid.NewUUID())[:8]
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.LeaseName},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	var rl resourcelock.Interface = lock
	if le.Fence != nil {
		rl = fencedLock{Interface: lock, fence: le.Fence}
	}
	lost := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            rl,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("became leader", "identity", id)
				fn(ctx)
			},
			OnStoppedLeading: func() {
				if le.Fence != nil {
					le.Fence.close()
				}
				log.Info("stopped leading", "identity", id)
				close(lost)
			},
			OnNewLeader: func(leader string) {
				if leader != id {
					log.Info("standing by", "leader", leader)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	elector.Run(ctx)
	select {
	case <-lost:
		if ctx.Err() == nil {
			return fmt.Errorf("leadership lost")
		}
	default:
	}
	return nil
}

// Serve runs the metrics and health endpoints until ctx ends: /metrics on
// metricsAddr, /healthz (alive) and /readyz (ready() is true) on healthAddr.
func Serve(ctx context.Context, metricsAddr, healthAddr string, gatherer prometheus.Gatherer, ready func() bool) error {
	errs := make(chan error, 2)
	var servers []*http.Server
	if metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
		servers = append(servers, &http.Server{Addr: metricsAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second})
	}
	if healthAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !ready() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		servers = append(servers, &http.Server{Addr: healthAddr, Handler: mux, ReadHeaderTimeout: 5 * time.Second})
	}
	for _, s := range servers {
		go func(s *http.Server) {
			if err := s.ListenAndServe(); err != nil && err != http.ErrServerClosed {
				errs <- fmt.Errorf("serving %s: %w", s.Addr, err)
			}
		}(s)
	}
	select {
	case <-ctx.Done():
	case err := <-errs:
		return err
	}
	shut, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shut)
	}
	return nil
}
