package kube

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/internal/cycle"
	"github.com/corral-dev/corral/internal/workload"
)

// The runtime history outlives the scheduler (issue 17): estimates learned
// over weeks of completions must not vanish at every upgrade, crash or
// leader change, when the new leader would go back to treating every job
// without a declared runtime as never ending. The last completed runs are
// kept in a ConfigMap (Options.RuntimeHistory) as CSV and replayed into a
// fresh history at start.
const (
	// historyDataKey is the ConfigMap key holding the runs.
	historyDataKey = "runs.csv"
	// maxStoredRuns is how many of the latest runs are kept: ten history
	// windows' worth, and at 300 bytes a row (long user and queue names)
	// still under the 1 MiB a ConfigMap may hold.
	maxStoredRuns = 2000
	// maxStoredBytes keeps the encoded runs inside a ConfigMap's limit
	// whatever the names: the oldest rows go first.
	maxStoredBytes = 900 << 10
	// historySaveEvery is the least time between two writes: completions
	// come in bursts, and one write a minute costs the API nothing.
	historySaveEvery = time.Minute
)

// historyFieldManager names corral's writes to the ConfigMap.
const historyFieldManager = "corral-scheduler"

// historyHeader is the CSV header; a stored history with another header is
// not read (a later version would write its own).
var historyHeader = []string{"finished", "user", "queue", "shape", "declared_seconds", "took_seconds"}

// storedRun is a completed run as stored: the run the history learned and
// when it ended (the order to replay them in).
type storedRun struct {
	cycle.Run
	Finished time.Time
}

var shapePattern = regexp.MustCompile(`^[0-9]+gpu$`)

// encodeRuns writes runs as CSV, dropping the oldest while the result is
// larger than maxBytes.
func encodeRuns(runs []storedRun, maxBytes int) (string, int) {
	for {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		_ = w.Write(historyHeader)
		for _, r := range runs {
			_ = w.Write([]string{r.Finished.UTC().Format(time.RFC3339), r.User, r.Queue, r.Shape,
				strconv.FormatInt(int64(r.Declared/time.Second), 10), strconv.FormatInt(int64(r.Took/time.Second), 10)})
		}
		w.Flush()
		if b.Len() <= maxBytes || len(runs) == 0 {
			return b.String(), len(runs)
		}
		runs = runs[max(1, len(runs)/10):]
	}
}

// decodeRuns reads stored runs. A row that does not parse is skipped and
// counted (a hand-edited ConfigMap must not stop the scheduler); a missing
// or foreign header is an error, and nothing is read.
func decodeRuns(data string) (runs []storedRun, skipped int, err error) {
	r, err := csvAfterHeader(data, historyHeader)
	if err != nil {
		return nil, 0, err
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			skipped++
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				continue
			}
			break
		}
		run, ok := parseRun(rec)
		if !ok {
			skipped++
			continue
		}
		runs = append(runs, run)
	}
	return runs, skipped, nil
}

// csvAfterHeader is a reader of data positioned after its header, which
// must be want (a stored history with another header is not read: a later
// version writes its own). Rows may have any number of fields; the caller
// checks them.
func csvAfterHeader(data string, want []string) (*csv.Reader, error) {
	r := csv.NewReader(strings.NewReader(data))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	if strings.Join(header, ",") != strings.Join(want, ",") {
		return nil, fmt.Errorf("header %q, want %q", strings.Join(header, ","), strings.Join(want, ","))
	}
	return r, nil
}

func parseRun(rec []string) (storedRun, bool) {
	if len(rec) != len(historyHeader) {
		return storedRun{}, false
	}
	finished, err := time.Parse(time.RFC3339, rec[0])
	if err != nil || !shapePattern.MatchString(rec[3]) && rec[3] != "0gpu" {
		return storedRun{}, false
	}
	declared, err1 := strconv.ParseInt(rec[4], 10, 64)
	took, err2 := strconv.ParseInt(rec[5], 10, 64)
	const maxSeconds = int64(1<<63-1) / int64(time.Second)
	if err1 != nil || err2 != nil || declared < 0 || took <= 0 || declared > maxSeconds || took > maxSeconds {
		return storedRun{}, false
	}
	return storedRun{Finished: finished, Run: cycle.Run{User: rec[1], Queue: rec[2], Shape: rec[3],
		Declared: time.Duration(declared) * time.Second, Took: time.Duration(took) * time.Second}}, true
}

// historyStore reads and writes the stored runs.
type historyStore struct {
	ref types.NamespacedName // zero: the history is kept in memory only
}

func (h historyStore) enabled() bool { return h.ref.Name != "" }

// stored is what the ConfigMap holds, decoded.
type stored struct {
	runs    []storedRun
	skipped int // rows of runs that did not parse
	ckpts   map[checkpointRun]cycle.Checkpoints
	// ckptSkipped counts checkpoint rows that did not parse; ckptErr says
	// why none could be read (a foreign header): the runs still count.
	ckptSkipped int
	ckptErr     error
}

// load reads the stored runs and the running jobs' checkpoints with one
// read; nothing (and no error) when the ConfigMap does not exist yet. A
// missing checkpoints key is no error (a history saved before they were
// kept); missing or unreadable runs are.
func (h historyStore) load(ctx context.Context, client kubernetes.Interface) (stored, error) {
	cm, err := client.CoreV1().ConfigMaps(h.ref.Namespace).Get(ctx, h.ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return stored{}, nil
	}
	if err != nil {
		return stored{}, err
	}
	data, ok := cm.Data[historyDataKey]
	if !ok {
		return stored{}, fmt.Errorf("ConfigMap %s has no %s", h.ref, historyDataKey)
	}
	var st stored
	if st.runs, st.skipped, err = decodeRuns(data); err != nil {
		return stored{}, fmt.Errorf("ConfigMap %s: %w", h.ref, err)
	}
	if cdata, ok := cm.Data[checkpointsDataKey]; ok {
		st.ckpts, st.ckptSkipped, st.ckptErr = decodeCheckpoints(cdata)
	}
	return st, nil
}

// save writes the runs and the running jobs' checkpoints, creating the
// ConfigMap the first time. kept is how many runs fit.
func (h historyStore) save(ctx context.Context, client kubernetes.Interface, runs []storedRun, ckpts map[checkpointRun]cycle.Checkpoints) (kept int, err error) {
	data, kept := encodeRuns(runs, maxStoredBytes-maxCheckpointBytes)
	cdata := encodeCheckpoints(ckpts, maxCheckpointBytes)
	cms := client.CoreV1().ConfigMaps(h.ref.Namespace)
	cm, err := cms.Get(ctx, h.ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: h.ref.Name, Namespace: h.ref.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "corral"}},
			Data: map[string]string{historyDataKey: data, checkpointsDataKey: cdata}}
		_, err = cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: historyFieldManager})
		return kept, err
	}
	if err != nil {
		return 0, err
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[historyDataKey] = data
	cm.Data[checkpointsDataKey] = cdata
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: historyFieldManager})
	return kept, err
}

// loadHistory replays the stored runs, then the ones completed since this
// process started, into a fresh history. Until a load succeeds nothing is
// saved, so that an unreadable store is never overwritten with less.
func (s *Scheduler) loadHistory(ctx context.Context) {
	st := s.runtimes.store
	if !st.enabled() || s.runtimes.loaded {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := st.load(ctx, s.client)
	if err != nil {
		if !s.runtimes.loadFailed {
			s.log.Warn("runtime history not loaded; estimates start from what completes now, and nothing is saved until it loads",
				"configmap", st.ref.String(), "err", err)
		}
		s.runtimes.loadFailed = true
		return
	}
	if got.ckptErr != nil {
		// Checkpoints only decide waits in the first hour: start without them.
		s.log.Warn("stored checkpoints not loaded", "configmap", st.ref.String(), "err", got.ckptErr)
	}
	s.runtimes.restore(got.runs)
	s.checkpoints.restore(got.ckpts)
	s.log.Info("runtime history loaded", "configmap", st.ref.String(), "runs", len(got.runs), "skipped_rows", got.skipped,
		"running_jobs_checkpoints", len(got.ckpts), "skipped_checkpoint_rows", got.ckptSkipped)
	s.reportHistory()
}

// reportHistory sets the history's gauges: the runs it rests on and how
// far each kind of estimate has come true. A source with too few scored
// runs reports its prior (declared 1: taken at its word; learned 0: not
// trusted), which is what the engine uses.
func (s *Scheduler) reportHistory() {
	h := &s.runtimes.hist
	s.metrics.historyRuns.Set(float64(h.Runs()))
	s.metrics.estimateConfidence.WithLabelValues("declared").Set(h.Confidence(cycle.SourceDeclared))
	s.metrics.estimateConfidence.WithLabelValues("learned").Set(h.Confidence(cycle.SourceGlobal))
}

// saveHistory writes the runs when new ones completed, at most once per
// historySaveEvery unless force (at shutdown).
func (s *Scheduler) saveHistory(ctx context.Context, force bool) {
	r := &s.runtimes
	s.reportHistory()
	if !r.store.enabled() || r.unsaved == 0 && !s.checkpoints.changed {
		return
	}
	now := s.opts.Clock()
	if !force && !r.savedAt.IsZero() && now.Sub(r.savedAt) < historySaveEvery {
		return
	}
	s.loadHistory(ctx)
	if !r.loaded {
		return
	}
	if err := s.opts.Fence.Check(); err != nil {
		return // not the leader for certain: the next one saves
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kept, err := r.store.save(ctx, s.client, r.stored, s.checkpoints.runs)
	r.savedAt = now
	if err != nil {
		s.metrics.historySaveErrors.Inc()
		if !r.saveFailing {
			// Once per episode: a missing namespace or permission fails
			// every minute until fixed, and the metric counts each.
			s.log.Warn("runtime history not saved; retrying every minute", "configmap", r.store.ref.String(), "err", err)
		}
		r.saveFailing = true
		return
	}
	if r.saveFailing {
		s.log.Info("runtime history saved again", "configmap", r.store.ref.String())
	}
	r.saveFailing = false
	r.unsaved, s.checkpoints.changed = 0, false
	if kept < len(r.stored) {
		r.stored = r.stored[len(r.stored)-kept:]
	}
}

// The checkpoints running jobs reported are kept beside the runs, so that
// after a restart a victim whose checkpoints were regular is still waited
// for (docs/preemption.md): the annotation holds only the last one, and the
// engine waits only once an interval was seen. One row per running job's
// run, its last maxStoredCheckpoints reports.
const (
	checkpointsDataKey   = "checkpoints.csv"
	maxStoredCheckpoints = 4
	// maxCheckpointBytes is the share of the ConfigMap the checkpoints may
	// take (some 2,500 running jobs); past it the runs started last are
	// left out.
	maxCheckpointBytes = 300 << 10
)

var checkpointsHeader = []string{"job", "started", "checkpoints"}

// encodeCheckpoints writes each run's last reports, by job then start.
func encodeCheckpoints(runs map[checkpointRun]cycle.Checkpoints, maxBytes int) string {
	keys := make([]checkpointRun, 0, len(runs))
	for k, c := range runs {
		if len(c) > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].job != keys[b].job {
			return keys[a].job < keys[b].job
		}
		return keys[a].start.Before(keys[b].start)
	})
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(checkpointsHeader)
	for _, k := range keys {
		c := runs[k]
		c = c[max(0, len(c)-maxStoredCheckpoints):]
		times := make([]string, len(c))
		for i, t := range c {
			times[i] = t.UTC().Format(time.RFC3339Nano)
		}
		w.Flush()
		if b.Len() > maxBytes {
			break
		}
		_ = w.Write([]string{string(k.job), k.start.UTC().Format(time.RFC3339Nano), strings.Join(times, " ")})
	}
	w.Flush()
	return b.String()
}

// decodeCheckpoints reads stored checkpoints; rows that do not parse are
// skipped and counted, a foreign header is an error.
func decodeCheckpoints(data string) (map[checkpointRun]cycle.Checkpoints, int, error) {
	r, err := csvAfterHeader(data, checkpointsHeader)
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoints: %w", err)
	}
	out := map[checkpointRun]cycle.Checkpoints{}
	skipped := 0
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		var pe *csv.ParseError
		if err != nil && !errors.As(err, &pe) {
			return out, skipped + 1, nil
		}
		if err != nil || len(rec) != len(checkpointsHeader) || rec[0] == "" {
			skipped++
			continue
		}
		start, err := time.Parse(time.RFC3339Nano, rec[1])
		if err != nil {
			skipped++
			continue
		}
		var c cycle.Checkpoints
		ok := true
		for _, f := range strings.Fields(rec[2]) {
			t, err := time.Parse(time.RFC3339Nano, f)
			if err != nil {
				ok = false
				break
			}
			c = c.Add(t)
		}
		if !ok || len(c) == 0 {
			skipped++
			continue
		}
		out[checkpointRun{job: workload.JobID(rec[0]), start: start}] = c
	}
	return out, skipped, nil
}
