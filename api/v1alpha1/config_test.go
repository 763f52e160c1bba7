package v1alpha1

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// defaults is the configuration with every field at its documented default,
// written out by hand (not by calling Default).
func defaults() *SchedulerConfiguration {
	on := true
	return &SchedulerConfiguration{
		TypeMeta:      metav1.TypeMeta{APIVersion: "corral.dev/v1alpha1", Kind: "SchedulerConfiguration"},
		SchedulerName: "corral",
		LeaderElection: LeaderElectionConfiguration{
			Enabled:       &on,
			Namespace:     "corral-system",
			LeaseName:     "corral-scheduler",
			LeaseDuration: metav1.Duration{Duration: 15 * time.Second},
			RenewDeadline: metav1.Duration{Duration: 10 * time.Second},
			RetryPeriod:   metav1.Duration{Duration: 2 * time.Second},
		},
		MetricsAddress:  ":8080",
		HealthAddress:   ":8081",
		CycleInterval:   metav1.Duration{Duration: time.Second},
		GPUResourceName: "nvidia.com/gpu",
		DRADriver:       "gpu.nvidia.com",
		RuntimeHistory:  "corral-runtime-history",
	}
}

const header = "apiVersion: corral.dev/v1alpha1\nkind: SchedulerConfiguration\n"

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfigDefaults(t *testing.T) {
	for name, path := range map[string]string{
		"no file":       "",
		"only the kind": writeConfig(t, header),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := LoadConfig(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(defaults(), got); diff != "" {
				t.Errorf("LoadConfig (-want +got):\n%s", diff)
			}
			if !got.LeaderElection.IsEnabled() {
				t.Error("leader election is off by default")
			}
		})
	}
}

func TestLoadConfigFull(t *testing.T) {
	path := writeConfig(t, header+`
schedulerName: gpu-batch
leaderElection:
  enabled: false
  namespace: sched
  leaseName: gpu-batch-lease
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 4s
metricsAddress: 127.0.0.1:9090
healthAddress: "[::1]:9091"
cycleInterval: 500ms
topologyName: dc1
gpuResourceName: example.com/gpu
draDriver: gpu.example.com
managedNodeSelector: corral.dev/pool in (training,inference),!cordoned
spares:
- level: rack
  gpus: 8
- level: cluster
  gpus: 16
  queue: team-a
backfill:
  maxReservations: -1
  starveAfter: 12h
  onMaxRuntime: Requeue
preemption:
  checkpointWait: 5m
  reclaimMaxLost: 2h
  reclaimGrace: 12h
  maxLostPerWork: 2.5
pools:
- name: prefill
  class: prefill
  nodeLabels: {pool: prefill}
  others: Preemptible
- name: spare-h100
  class: serving
  gpus: 64
  model: H100
runtimeHistory: ops/gpu-batch-runtimes
`)
	off := false
	want := &SchedulerConfiguration{
		TypeMeta:      metav1.TypeMeta{APIVersion: "corral.dev/v1alpha1", Kind: "SchedulerConfiguration"},
		SchedulerName: "gpu-batch",
		LeaderElection: LeaderElectionConfiguration{
			Enabled:       &off,
			Namespace:     "sched",
			LeaseName:     "gpu-batch-lease",
			LeaseDuration: metav1.Duration{Duration: 30 * time.Second},
			RenewDeadline: metav1.Duration{Duration: 20 * time.Second},
			RetryPeriod:   metav1.Duration{Duration: 4 * time.Second},
		},
		MetricsAddress:      "127.0.0.1:9090",
		HealthAddress:       "[::1]:9091",
		CycleInterval:       metav1.Duration{Duration: 500 * time.Millisecond},
		TopologyName:        "dc1",
		GPUResourceName:     "example.com/gpu",
		DRADriver:           "gpu.example.com",
		ManagedNodeSelector: "corral.dev/pool in (training,inference),!cordoned",
		Spares:              []SpareConfig{{Level: "rack", GPUs: 8}, {Level: "cluster", GPUs: 16, Queue: "team-a"}},
		Backfill:            BackfillSettings{MaxReservations: -1, StarveAfter: metav1.Duration{Duration: 12 * time.Hour}, OnMaxRuntime: "Requeue"},
		Preemption: PreemptionSettings{CheckpointWait: metav1.Duration{Duration: 5 * time.Minute},
			ReclaimMaxLost: metav1.Duration{Duration: 2 * time.Hour}, ReclaimGrace: metav1.Duration{Duration: 12 * time.Hour},
			MaxLostPerWork: "2.5"},
		Pools: []PoolConfig{{Name: "prefill", Class: "prefill", NodeLabels: map[string]string{"pool": "prefill"}, Others: "Preemptible"},
			{Name: "spare-h100", Class: "serving", GPUs: 64, Model: "H100"}},
		RuntimeHistory: "ops/gpu-batch-runtimes",
	}
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LoadConfig (-want +got):\n%s", diff)
	}
	if got.LeaderElection.IsEnabled() {
		t.Error("leaderElection.enabled: false was not honoured")
	}
}

func TestLoadConfigErrors(t *testing.T) {
	cases := map[string]struct {
		body string // after the apiVersion/kind header unless noHeader
		bare bool   // body is the whole file
		want []string
	}{
		"unknown top-level field":  {body: "schedulerNam: corral\n", want: []string{`unknown field "schedulerNam"`}},
		"unknown nested field":     {body: "leaderElection:\n  leaseDuraton: 10s\n", want: []string{`unknown field "leaderElection.leaseDuraton"`}},
		"field names are cased":    {body: "SchedulerName: corral\n", want: []string{`unknown field "SchedulerName"`}},
		"spare without GPUs":       {body: "spares:\n- level: rack\n", want: []string{"spares[0].gpus: Invalid value: 0"}},
		"spare without level":      {body: "spares:\n- gpus: 8\n", want: []string{"spares[0].level: Required value"}},
		"bad max-runtime action":   {body: "backfill:\n  onMaxRuntime: Kill\n", want: []string{"backfill.onMaxRuntime: Unsupported value"}},
		"bad starvation age":       {body: "backfill:\n  starveAfter: a day\n", want: []string{"backfill.starveAfter:", "a day"}},
		"negative reclaim grace":   {body: "preemption:\n  reclaimGrace: -1h\n", want: []string{"preemption.reclaimGrace: Invalid value", "must not be negative"}},
		"bad lost-work factor":     {body: "preemption:\n  maxLostPerWork: twice\n", want: []string{"preemption.maxLostPerWork: Invalid value", `"twice"`, `want a decimal number such as 2 or "2.5"`}},
		"lost-work factor NaN":     {body: "preemption:\n  maxLostPerWork: \"NaN\"\n", want: []string{"preemption.maxLostPerWork: Invalid value", "want a decimal number"}},
		"lost-work factor a list":  {body: "preemption:\n  maxLostPerWork: [2]\n", want: []string{"preemption.maxLostPerWork", "want a decimal number", "got [2]"}},
		"pool without nodes":       {body: "pools:\n- name: p\n  class: c\n", want: []string{"pools[0].nodeLabels: Required value"}},
		"pool without class":       {body: "pools:\n- name: p\n  gpus: 8\n", want: []string{"pools[0].class: Required value"}},
		"duplicate pool":           {body: "pools:\n- {name: p, class: c, gpus: 8}\n- {name: p, class: d, gpus: 8}\n", want: []string{"pools[1].name: Duplicate value"}},
		"bad pool access":          {body: "pools:\n- {name: p, class: c, gpus: 8, others: Open}\n", want: []string{"pools[0].others: Unsupported value"}},
		"duplicate field":          {body: "cycleInterval: 1s\ncycleInterval: 2s\n", want: []string{`"cycleInterval"`, "already set"}},
		"bad duration":             {body: "cycleInterval: fast\n", want: []string{"cycleInterval:", `invalid duration "fast"`}},
		"nested bad duration":      {body: "leaderElection:\n  retryPeriod: 2 seconds\n", want: []string{"leaderElection.retryPeriod:", "2 seconds"}},
		"duration without unit":    {body: "cycleInterval: 5\n", want: []string{"cycleInterval:", `want a duration such as "10s"`, "got 5"}},
		"negative duration":        {body: "cycleInterval: -1s\n", want: []string{"cycleInterval: Invalid value", "must be a positive duration"}},
		"wrong type":               {body: "schedulerName: [a, b]\n", want: []string{"schedulerName"}},
		"missing apiVersion":       {bare: true, body: "kind: SchedulerConfiguration\n", want: []string{`apiVersion: want "corral.dev/v1alpha1"`}},
		"wrong kind":               {bare: true, body: "apiVersion: corral.dev/v1alpha1\nkind: Config\n", want: []string{`kind: want "SchedulerConfiguration", got "Config"`}},
		"not a mapping":            {bare: true, body: "- a\n- b\n", want: []string{"not a YAML mapping"}},
		"empty file":               {bare: true, body: "", want: []string{"not a YAML mapping"}},
		"lease shorter than renew": {body: "leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n", want: []string{"leaderElection.leaseDuration", "greater than renewDeadline"}},
		"renew within jitter":      {body: "leaderElection:\n  renewDeadline: 2s\n  retryPeriod: 2s\n", want: []string{"leaderElection.renewDeadline", "1.2 × retryPeriod"}},
		"bad lease namespace":      {body: "leaderElection:\n  namespace: Corral_System\n", want: []string{"leaderElection.namespace"}},
		"bad address":              {body: "metricsAddress: localhost\n", want: []string{"metricsAddress", "host:port"}},
		"bad port":                 {body: "healthAddress: \":http\"\n", want: []string{"healthAddress", "port must be a number"}},
		"same address twice":       {body: "metricsAddress: \":9000\"\nhealthAddress: \":9000\"\n", want: []string{"healthAddress", "must differ from metricsAddress"}},
		"bad scheduler name":       {body: "schedulerName: My Scheduler\n", want: []string{"schedulerName"}},
		"bad selector":             {body: "managedNodeSelector: \"a in b\"\n", want: []string{"managedNodeSelector"}},
		"gpu resource sans domain": {body: "gpuResourceName: gpu\n", want: []string{"gpuResourceName", "domain prefix"}},
		"bad dra driver":           {body: "draDriver: GPU_driver\n", want: []string{"draDriver"}},
		"bad topology name":        {body: "topologyName: My Topology\n", want: []string{"topologyName"}},
		"bad history name":         {body: "runtimeHistory: Runtimes\n", want: []string{"runtimeHistory", "ConfigMap name"}},
		"bad history namespace":    {body: "runtimeHistory: a_b/runtimes\n", want: []string{"runtimeHistory", "namespace"}},
		"every problem is listed": {
			body: "schedulerName: A\ndraDriver: B\n",
			want: []string{"schedulerName", "draDriver"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			body := header + tc.body
			if tc.bare {
				body = tc.body
			}
			path := writeConfig(t, body)
			got, err := LoadConfig(path)
			if err == nil {
				t.Fatalf("LoadConfig = %+v, want an error", got)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestEndpointsOff(t *testing.T) {
	c, err := ParseConfig([]byte(header + "metricsAddress: \"0\"\nhealthAddress: \"0\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsAddress != AddressOff || c.HealthAddress != AddressOff {
		t.Errorf("addresses = %q, %q, want both %q", c.MetricsAddress, c.HealthAddress, AddressOff)
	}
}

func TestRuntimeHistoryOff(t *testing.T) {
	c, err := ParseConfig([]byte(header + "runtimeHistory: \"0\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.RuntimeHistory != RuntimeHistoryOff {
		t.Errorf("runtimeHistory = %q, want %q", c.RuntimeHistory, RuntimeHistoryOff)
	}
}

func TestSplitRuntimeHistory(t *testing.T) {
	for _, tc := range []struct{ in, ns, name string }{
		{"runtimes", "corral-system", "runtimes"},
		{"ops/runtimes", "ops", "runtimes"},
	} {
		ns, name, err := SplitRuntimeHistory(tc.in, "corral-system")
		if err != nil || ns != tc.ns || name != tc.name {
			t.Errorf("SplitRuntimeHistory(%q) = %q, %q, %v; want %q, %q", tc.in, ns, name, err, tc.ns, tc.name)
		}
	}
	for _, bad := range []string{"", "ops/", "/runtimes", "a/b/c", "Runtimes"} {
		if _, _, err := SplitRuntimeHistory(bad, "corral-system"); err == nil {
			t.Errorf("SplitRuntimeHistory(%q): want an error", bad)
		}
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig(filepath.Join(t.TempDir(), "absent.yaml"))
	if err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Fatalf("LoadConfig(absent) = %v, want an error naming the file", err)
	}
}

func TestDefaultKeepsSetFields(t *testing.T) {
	c := &SchedulerConfiguration{SchedulerName: "x", CycleInterval: metav1.Duration{Duration: time.Minute}}
	c.Default()
	if c.SchedulerName != "x" || c.CycleInterval.Duration != time.Minute {
		t.Errorf("Default overwrote set fields: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() after Default() = %v", err)
	}
}

func TestDefaultedConfigIsValid(t *testing.T) {
	if err := defaults().Validate(); err != nil {
		t.Fatalf("the defaults are invalid: %v", err)
	}
}

// Every duration field must be checked by path before the typed decode, or
// a bad value would be reported without its field name.
func TestDurationPathsCoverEveryDuration(t *testing.T) {
	got := fieldPaths(reflect.TypeFor[SchedulerConfiguration](), reflect.TypeFor[metav1.Duration](), "")
	want := []string{"leaderElection.leaseDuration", "leaderElection.renewDeadline", "leaderElection.retryPeriod", "cycleInterval", "backfill.starveAfter",
		"preemption.checkpointWait", "preemption.reclaimMaxLost", "preemption.reclaimGrace"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fieldPaths (-want +got):\n%s", diff)
	}
}

// Likewise every decimal, whose decode error names no field either.
func TestDecimalPathsCoverEveryDecimal(t *testing.T) {
	got := fieldPaths(reflect.TypeFor[SchedulerConfiguration](), reflect.TypeFor[Decimal](), "")
	if diff := cmp.Diff([]string{"preemption.maxLostPerWork"}, got); diff != "" {
		t.Errorf("fieldPaths (-want +got):\n%s", diff)
	}
}

// TestMaxLostPerWork: the preemption bound on lost work is a decimal the
// file may quote or not (Helm renders a values file's 2.5 bare); unset
// keeps the engine's default, negative turns the bound off, and anything
// but a plain finite decimal is an error naming the field.
func TestMaxLostPerWork(t *testing.T) {
	const bad = `preemption.maxLostPerWork: Invalid value`
	for name, tc := range map[string]struct {
		yaml    string // the value as written after "maxLostPerWork: "; "" leaves the field out
		want    float64
		wantErr string // a part of the error; "" for none
	}{
		"unset: the default":      {want: 0},
		"bare integer":            {yaml: "2", want: 2},
		"bare fraction":           {yaml: "2.5", want: 2.5},
		"quoted fraction":         {yaml: `"1.5"`, want: 1.5},
		"zero: the default":       {yaml: "0", want: 0},
		"quoted empty: unset":     {yaml: `""`, want: 0},
		"null: unset":             {yaml: "null", want: 0},
		"negative: no bound":      {yaml: "-1", want: -1},
		"exponent":                {yaml: "1e1", want: 10},
		"a word":                  {yaml: "twice", wantErr: bad},
		"a percentage":            {yaml: `"250%"`, wantErr: bad},
		"infinity as a string":    {yaml: `"Inf"`, wantErr: bad},
		"not a number":            {yaml: `"NaN"`, wantErr: bad},
		"hexadecimal":             {yaml: `"0x2p0"`, wantErr: bad},
		"digits with underscores": {yaml: `"1_0"`, wantErr: bad},
		"out of range":            {yaml: `"1e999"`, wantErr: bad},
		"two signs":               {yaml: `"--2"`, wantErr: bad},
		"a boolean":               {yaml: "true", wantErr: `preemption.maxLostPerWork: want a decimal number such as 2 or "2.5", got true`},
		"a mapping":               {yaml: "{x: 2}", wantErr: `preemption.maxLostPerWork: want a decimal number such as 2 or "2.5", got {"x":2}`},
		// YAML's own infinity cannot become JSON: an error, as for any
		// number field, though it cannot name the field.
		"YAML infinity": {yaml: ".inf", wantErr: "unsupported value"},
	} {
		t.Run(name, func(t *testing.T) {
			body := header + "preemption:\n  checkpointWait: 5m\n"
			if tc.yaml != "" {
				body += "  maxLostPerWork: " + tc.yaml + "\n"
			}
			c, err := ParseConfig([]byte(body))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseConfig error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Preemption.MaxLostPerWork.Float()
			if err != nil || got != tc.want {
				t.Errorf("maxLostPerWork %q = %v, %v; want %v", c.Preemption.MaxLostPerWork, got, err, tc.want)
			}
		})
	}
}
