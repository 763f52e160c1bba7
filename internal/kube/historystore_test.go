package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/engine"
)

var historyRef = types.NamespacedName{Namespace: "corral-system", Name: "corral-runtime-history"}

// storedRunOf is a completed run of a job of user, queue and GPUs that took
// d and finished at minute min after reportT0.
func storedRunOf(user, queue string, gpus int, d time.Duration, min int) storedRun {
	j := build.Job("j").Pods(1).GPUs(gpus).Obj()
	j.User, j.Queue = user, queue
	return storedRun{Run: cycle.RunOf(j, d), Finished: reportT0.Add(time.Duration(min) * time.Minute)}
}

// historyScheduler is a scheduler reduced to what the runtime history
// uses, on client, with the store at historyRef.
func historyScheduler(client kubernetes.Interface) *Scheduler {
	s := &Scheduler{client: client, opts: Options{Clock: func() time.Time { return reportT0 }, RuntimeHistory: historyRef},
		log: slog.New(slog.DiscardHandler), metrics: newMetrics(nil, reportT0)}
	s.runtimes.store = historyStore{ref: historyRef}
	return s
}

func TestEncodeDecodeRuns(t *testing.T) {
	runs := []storedRun{
		storedRunOf("alice", "team-a", 8, 3*time.Hour, 1),
		storedRunOf(`bob, "the builder"`, "team-b", 2, 90*time.Second, 2), // CSV quoting
		storedRunOf("", "", 0, time.Minute, 3),
	}
	runs[0].Declared = 5 * time.Hour
	data, kept := encodeRuns(runs, maxStoredBytes)
	if kept != len(runs) {
		t.Fatalf("kept %d of %d runs", kept, len(runs))
	}
	got, skipped, err := decodeRuns(data)
	if err != nil || skipped != 0 {
		t.Fatalf("decodeRuns: skipped %d, err %v\n%s", skipped, err, data)
	}
	if diff := cmp.Diff(runs, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestEncodeRunsKeepsTheLatestWithinTheLimit: a history larger than a
// ConfigMap may hold loses its oldest runs, never its newest.
func TestEncodeRunsKeepsTheLatestWithinTheLimit(t *testing.T) {
	var runs []storedRun
	for i := range 1000 {
		runs = append(runs, storedRunOf(strings.Repeat("u", 60), "q", 8, time.Duration(i+1)*time.Minute, i))
	}
	data, kept := encodeRuns(runs, 20<<10)
	if len(data) > 20<<10 || kept >= len(runs) || kept == 0 {
		t.Fatalf("encoded %d bytes keeping %d of %d runs, want at most %d bytes and some dropped", len(data), kept, len(runs), 20<<10)
	}
	got, _, err := decodeRuns(data)
	if err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1]; last.Took != 1000*time.Minute {
		t.Errorf("the newest run kept took %s, want 1000m", last.Took)
	}
}

func TestDecodeRunsRefusesBadInput(t *testing.T) {
	const header = "finished,user,queue,shape,declared_seconds,took_seconds\n"
	const good = "2026-11-24T01:00:00Z,alice,team-a,8gpu,0,3600\n"
	for _, tc := range []struct {
		name        string
		data        string
		wantRuns    int
		wantSkipped int
		wantErr     string
	}{
		{"good", header + good, 1, 0, ""},
		{"empty", "", 0, 0, "header"},
		{"foreign header", "when,who\n" + good, 0, 0, "header"},
		{"short row", header + "2026-11-24T01:00:00Z,alice\n" + good, 1, 1, ""},
		{"bad time", header + "yesterday,alice,team-a,8gpu,0,3600\n" + good, 1, 1, ""},
		{"bad shape", header + "2026-11-24T01:00:00Z,alice,team-a,eight,0,3600\n" + good, 1, 1, ""},
		{"zero runtime", header + "2026-11-24T01:00:00Z,alice,team-a,8gpu,0,0\n" + good, 1, 1, ""},
		{"negative declared", header + "2026-11-24T01:00:00Z,alice,team-a,8gpu,-5,60\n" + good, 1, 1, ""},
		{"overflowing runtime", header + "2026-11-24T01:00:00Z,alice,team-a,8gpu,0,99999999999999999\n" + good, 1, 1, ""},
		{"bare quote", header + "2026-11-24T01:00:00Z,al\"ice,team-a,8gpu,0,60\n" + good, 1, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, skipped, err := decodeRuns(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(runs) != tc.wantRuns || skipped != tc.wantSkipped {
				t.Errorf("got %d runs, %d skipped, err %v; want %d, %d", len(runs), skipped, err, tc.wantRuns, tc.wantSkipped)
			}
		})
	}
}

// TestRuntimeHistorySurvivesARestart: the runs one scheduler learned are
// saved to the ConfigMap, and the next scheduler (a restart, a new
// leader) estimates from them as the first did, runs it learned before
// the load included.
func TestRuntimeHistorySurvivesARestart(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	first := historyScheduler(client)
	first.loadHistory(ctx) // nothing stored yet: an empty start
	for i := range 12 {
		first.runtimes.observe(storedRunOf("alice", "team-a", 8, time.Duration(60+i)*time.Minute, i))
	}
	first.saveHistory(ctx, false)
	if first.runtimes.unsaved != 0 {
		t.Fatalf("%d runs unsaved after the first save", first.runtimes.unsaved)
	}

	second := historyScheduler(client)
	// A run that completes before the store is read is kept too.
	second.runtimes.observe(storedRunOf("alice", "team-a", 8, 2*time.Hour, 100))
	second.loadHistory(ctx)
	if got := second.runtimes.hist.Runs(); got != 13 {
		t.Fatalf("the second scheduler learned from %d runs, want 13", got)
	}
	j := build.Job("next").Pods(1).GPUs(8).Obj()
	j.User, j.Queue = "alice", "team-a"
	want := &cycle.History{}
	for _, r := range first.runtimes.stored {
		want.ObserveRun(r.Run)
	}
	want.ObserveRun(storedRunOf("alice", "team-a", 8, 2*time.Hour, 100).Run)
	wd, wsrc, _ := cycle.Runtime(want, j)
	gd, gsrc, ok := cycle.Runtime(&second.runtimes.hist, j)
	if !ok || gd != wd || gsrc != wsrc || gsrc != cycle.SourceUserShape {
		t.Errorf("estimate after the restart = %s from %q (ok %v), want %s from %q", gd, gsrc, ok, wd, wsrc)
	}
	if second.runtimes.unsaved != 1 {
		t.Errorf("unsaved = %d, want the one run completed before the load", second.runtimes.unsaved)
	}
}

// TestUnreadableHistoryIsNotOverwritten: a ConfigMap corral cannot read
// (another format, hand-edited) is left as it is; the scheduler learns
// in memory and says why it does not save.
func TestUnreadableHistoryIsNotOverwritten(t *testing.T) {
	foreign := "when,who\nmonday,alice\n"
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: historyRef.Name, Namespace: historyRef.Namespace},
		Data: map[string]string{historyDataKey: foreign}})
	ctx := context.Background()
	s := historyScheduler(client)
	var logged strings.Builder
	s.log = slog.New(slog.NewTextHandler(&logged, nil))
	s.loadHistory(ctx)
	s.runtimes.observe(storedRunOf("alice", "team-a", 8, time.Hour, 1))
	s.saveHistory(ctx, true)
	cm, err := client.CoreV1().ConfigMaps(historyRef.Namespace).Get(ctx, historyRef.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data[historyDataKey]; got != foreign {
		t.Errorf("the unreadable history was overwritten:\n%s", got)
	}
	if s.runtimes.hist.Runs() != 1 {
		t.Errorf("learned %d runs in memory, want 1", s.runtimes.hist.Runs())
	}
	if n := strings.Count(logged.String(), "runtime history not loaded"); n != 1 {
		t.Errorf("warned %d times, want once:\n%s", n, logged.String())
	}
}

// TestHistorySavesAtMostOncePerInterval: completions in a burst make one
// write, and a later one waits for historySaveEvery.
func TestHistorySavesAtMostOncePerInterval(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	now := reportT0
	s := historyScheduler(client)
	s.opts.Clock = func() time.Time { return now }
	s.loadHistory(ctx)
	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" || a.GetVerb() == "update" {
				n++
			}
		}
		return n
	}
	for i := range 3 {
		s.runtimes.observe(storedRunOf("alice", "team-a", 8, time.Hour, i))
		s.saveHistory(ctx, false)
	}
	now = now.Add(historySaveEvery / 2)
	s.runtimes.observe(storedRunOf("alice", "team-a", 8, time.Hour, 10))
	s.saveHistory(ctx, false)
	if got := writes(); got != 1 {
		t.Fatalf("%d writes within %s, want 1", got, historySaveEvery)
	}
	now = now.Add(historySaveEvery)
	s.saveHistory(ctx, false)
	if got := writes(); got != 2 {
		t.Errorf("%d writes after %s, want 2", got, historySaveEvery)
	}
	cm, _ := client.CoreV1().ConfigMaps(historyRef.Namespace).Get(ctx, historyRef.Name, metav1.GetOptions{})
	runs, _, err := decodeRuns(cm.Data[historyDataKey])
	if err != nil || len(runs) != 4 {
		t.Errorf("stored %d runs (err %v), want 4", len(runs), err)
	}
}

func TestEncodeDecodeCheckpoints(t *testing.T) {
	start := reportT0.Add(time.Hour)
	runs := map[checkpointRun]cycle.Checkpoints{}
	var c cycle.Checkpoints
	for i := 1; i <= 6; i++ {
		c = c.Add(start.Add(time.Duration(i) * 30 * time.Minute))
	}
	runs[checkpointRun{job: "job/ns/a", start: start}] = c
	runs[checkpointRun{job: "job/ns/b", start: start.Add(time.Minute)}] = nil // no report: not stored
	got, skipped, err := decodeCheckpoints(encodeCheckpoints(runs, maxCheckpointBytes))
	if err != nil || skipped != 0 {
		t.Fatalf("decode: skipped %d, err %v", skipped, err)
	}
	want := map[checkpointRun]cycle.Checkpoints{{job: "job/ns/a", start: start}: c[len(c)-maxStoredCheckpoints:]}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(checkpointRun{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}

	const header = "job,started,checkpoints\n"
	for name, data := range map[string]string{
		"bad start":  header + "job/ns/a,soon,2026-11-24T01:00:00Z\n",
		"bad time":   header + "job/ns/a,2026-11-24T00:00:00Z,2026-11-24T01:00:00Z later\n",
		"no reports": header + "job/ns/a,2026-11-24T00:00:00Z,\n",
		"no job":     header + ",2026-11-24T00:00:00Z,2026-11-24T01:00:00Z\n",
	} {
		got, skipped, err := decodeCheckpoints(data)
		if err != nil || skipped != 1 || len(got) != 0 {
			t.Errorf("%s: %d runs, %d skipped, err %v; want the row skipped", name, len(got), skipped, err)
		}
	}
	if _, _, err := decodeCheckpoints("job,when\n"); err == nil {
		t.Error("a foreign header was read")
	}
}

// TestCheckpointsSurviveARestart: the reports a running job made while one
// scheduler watched are stored; the next scheduler, which sees only the
// annotation's last value, still has the job's intervals, so its next
// checkpoint is predictable at once (without the store it would take two
// more intervals).
func TestCheckpointsSurviveARestart(t *testing.T) {
	client := fake.NewClientset()
	ctx := context.Background()
	start := reportT0.Add(time.Hour)
	job := build.Job("job/ns/train").Pods(2).GPUs(8).Preemptible().Obj()
	running := func(last time.Time) []engine.RunningJob {
		return []engine.RunningJob{{Job: job, Start: start, Checkpoints: cycle.Checkpoints{}.Add(last)}}
	}
	first := historyScheduler(client)
	first.loadHistory(ctx)
	for i := 1; i <= 3; i++ {
		first.checkpoints.observe(running(start.Add(time.Duration(i) * 30 * time.Minute)))
	}
	first.saveHistory(ctx, false)

	second := historyScheduler(client)
	second.loadHistory(ctx)
	now := running(start.Add(90 * time.Minute))
	second.checkpoints.observe(now)
	got := now[0].Checkpoints
	if len(got) != 3 {
		t.Fatalf("after the restart the run has %d reports, want 3: %v", len(got), got)
	}
	p, ok := got.Within(start, start.Add(100*time.Minute)).Predict()
	if !ok || p.Intervals != 2 || !p.Next.Equal(start.Add(120*time.Minute)) {
		t.Errorf("prediction after the restart = %+v (ok %v), want the next report at +120m from 2 intervals", p, ok)
	}
}

// TestCheckpointChangesThatCauseASave: a new report or the end of a run
// that had reports needs a save; a run starting or ending without reports
// does not (a save it caused would hold back the next runs by a minute).
func TestCheckpointChangesThatCauseASave(t *testing.T) {
	start := reportT0.Add(time.Hour)
	rj := func(id string, last time.Time) engine.RunningJob {
		return engine.RunningJob{Job: build.Job(id).Pods(1).GPUs(8).Obj(), Start: start, Checkpoints: cycle.Checkpoints{}.Add(last)}
	}
	var h checkpointHistory
	steps := []struct {
		name    string
		running []engine.RunningJob
		want    bool
	}{
		{"a run starts without reports", []engine.RunningJob{rj("a", time.Time{})}, false},
		{"it reports", []engine.RunningJob{rj("a", start.Add(30*time.Minute))}, true},
		{"the same report again", []engine.RunningJob{rj("a", start.Add(30*time.Minute))}, false},
		{"another run starts without reports", []engine.RunningJob{rj("a", start.Add(30*time.Minute)), rj("b", time.Time{})}, false},
		{"the run without reports ends", []engine.RunningJob{rj("a", start.Add(30*time.Minute))}, false},
		{"the run with reports ends", nil, true},
	}
	for _, st := range steps {
		h.changed = false
		h.observe(st.running)
		if h.changed != st.want {
			t.Errorf("%s: changed = %v, want %v", st.name, h.changed, st.want)
		}
	}
}

// TestFailingSavesWarnOnce: a store that cannot be written (here: a
// namespace that does not exist is simulated by a client refusing
// creates) is retried every minute, counted each time, and warned about
// once until a save succeeds again.
func TestFailingSavesWarnOnce(t *testing.T) {
	client := fake.NewClientset()
	refuse := true
	client.PrependReactor("create", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if refuse {
			return true, nil, fmt.Errorf("namespaces %q not found", historyRef.Namespace)
		}
		return false, nil, nil
	})
	ctx := context.Background()
	now := reportT0
	s := historyScheduler(client)
	s.opts.Clock = func() time.Time { return now }
	var logged strings.Builder
	s.log = slog.New(slog.NewTextHandler(&logged, nil))
	s.loadHistory(ctx)
	for i := range 3 {
		s.runtimes.observe(storedRunOf("alice", "team-a", 8, time.Hour, i))
		s.saveHistory(ctx, false)
		now = now.Add(historySaveEvery)
	}
	if n := strings.Count(logged.String(), "runtime history not saved"); n != 1 {
		t.Errorf("warned %d times over 3 failed saves, want once:\n%s", n, logged.String())
	}
	if got := testutil.ToFloat64(s.metrics.historySaveErrors); got != 3 {
		t.Errorf("save errors counted %v, want 3", got)
	}
	refuse = false
	s.saveHistory(ctx, false)
	if s.runtimes.unsaved != 0 || !strings.Contains(logged.String(), "runtime history saved again") {
		t.Errorf("after the store came back: %d unsaved, log:\n%s", s.runtimes.unsaved, logged.String())
	}
}

// TestEstimateConfidenceGauge: the gauge says how far each kind of
// estimate came true, as the engine sees it: runs declaring twice their
// real runtime score 0.5; learned estimates are scored once enough runs
// are known; before any run, declared ones are taken at their word (1)
// and learned ones not trusted (0).
func TestEstimateConfidenceGauge(t *testing.T) {
	s := historyScheduler(fake.NewClientset())
	gauge := func(src string) float64 { return testutil.ToFloat64(s.metrics.estimateConfidence.WithLabelValues(src)) }
	s.reportHistory()
	if d, l := gauge("declared"), gauge("learned"); d != 1 || l != 0 {
		t.Errorf("before any run: declared %v, learned %v; want 1 and 0", d, l)
	}
	for i := range 20 {
		r := storedRunOf("alice", "team-a", 8, time.Hour, i)
		r.Declared = 2 * time.Hour
		s.runtimes.observe(r)
	}
	s.reportHistory()
	h := &s.runtimes.hist
	if d := gauge("declared"); d != 0.5 || d != h.Confidence(cycle.SourceDeclared) {
		t.Errorf("declared confidence %v, want 0.5 (= History.Confidence %v)", d, h.Confidence(cycle.SourceDeclared))
	}
	if l := gauge("learned"); l <= 0 || l != h.Confidence(cycle.SourceGlobal) {
		t.Errorf("learned confidence %v, want History.Confidence %v > 0", l, h.Confidence(cycle.SourceGlobal))
	}
	if got := testutil.ToFloat64(s.metrics.historyRuns); got != 20 {
		t.Errorf("runs gauge %v, want 20", got)
	}
}
