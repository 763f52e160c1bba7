package v1alpha1

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// leaderElectionJitter is client-go's leaderelection.JitterFactor: the
// renew deadline must exceed the retry period times this factor.
const leaderElectionJitter = 1.2

// LoadConfig reads, defaults and validates the scheduler's configuration
// file. An empty path means no file: every field takes its default.
func LoadConfig(path string) (*SchedulerConfiguration, error) {
	if path == "" {
		c := &SchedulerConfiguration{}
		c.Default()
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading scheduler configuration: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("scheduler configuration %s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes a SchedulerConfiguration document (YAML or JSON),
// strictly: apiVersion and kind must be corral.dev/v1alpha1 and
// SchedulerConfiguration, and an unknown or duplicate field is an error that
// names it (e.g. `unknown field "leaderElection.leaseDuraton"`). The result
// is defaulted and validated.
func ParseConfig(data []byte) (*SchedulerConfiguration, error) {
	// YAMLToJSONStrict rejects duplicate keys; the JSON goes on to a strict,
	// case-sensitive decode.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	var raw map[string]any
	if err := json.Unmarshal(js, &raw); err != nil || raw == nil {
		return nil, errors.New("not a YAML mapping (want apiVersion: corral.dev/v1alpha1, kind: SchedulerConfiguration, ...)")
	}
	if err := checkTypeMeta(raw); err != nil {
		return nil, err
	}
	// metav1.Duration's own error does not say which field it came from,
	// nor does Decimal's: check every duration and the shape of every
	// decimal here, by path, before the typed decode. (Validate checks a
	// decimal's value, also by path.)
	cfgType := reflect.TypeFor[SchedulerConfiguration]()
	for _, path := range fieldPaths(cfgType, reflect.TypeFor[metav1.Duration](), "") {
		if err := checkDuration(raw, path); err != nil {
			return nil, err
		}
	}
	for _, path := range fieldPaths(cfgType, reflect.TypeFor[Decimal](), "") {
		if err := checkDecimal(raw, path); err != nil {
			return nil, err
		}
	}
	var c SchedulerConfiguration
	strict, err := kjson.UnmarshalStrict(js, &c, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	c.Default()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func checkTypeMeta(raw map[string]any) error {
	want := GroupVersion.String()
	if v, _ := raw["apiVersion"].(string); v != want {
		return fmt.Errorf("apiVersion: want %q, got %q", want, fmtValue(raw["apiVersion"]))
	}
	if k, _ := raw["kind"].(string); k != SchedulerConfigurationKind {
		return fmt.Errorf("kind: want %q, got %q", SchedulerConfigurationKind, fmtValue(raw["kind"]))
	}
	return nil
}

func fmtValue(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// fieldPaths lists the JSON paths ("a.b") of every field of type want in
// t, descending into struct fields.
func fieldPaths(t, want reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue // inline TypeMeta: no settings there
		}
		path := prefix + name
		switch {
		case f.Type == want:
			out = append(out, path)
		case f.Type.Kind() == reflect.Struct:
			out = append(out, fieldPaths(f.Type, want, path+".")...)
		}
	}
	return out
}

// valueAt is the value at path in the decoded document; ok is false when
// it is absent or a parent is not a mapping (the typed decode reports the
// wrong shape).
func valueAt(raw map[string]any, path string) (v any, ok bool) {
	v = raw
	for _, k := range strings.Split(path, ".") {
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// checkDecimal checks the value at path in the decoded document, if any, is
// a string or a number, what Decimal decodes; whether a string is a number
// is Validate's to say.
func checkDecimal(raw map[string]any, path string) error {
	v, ok := valueAt(raw, path)
	if !ok || v == nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return nil
	}
	return fmt.Errorf("%s: %w, got %s", path, errDecimal, jsonText(v))
}

// checkDuration checks the value at path in the decoded document, if any, is
// a Go duration string.
func checkDuration(raw map[string]any, path string) error {
	v, ok := valueAt(raw, path)
	if !ok {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s: want a duration such as \"10s\" or \"1m30s\", got %s", path, jsonText(v))
	}
	if _, err := time.ParseDuration(s); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Default fills in every unset field with its documented default.
func (c *SchedulerConfiguration) Default() {
	if c.APIVersion == "" {
		c.APIVersion = GroupVersion.String()
	}
	if c.Kind == "" {
		c.Kind = SchedulerConfigurationKind
	}
	setString(&c.SchedulerName, SchedulerName)
	setString(&c.MetricsAddress, DefaultMetricsAddress)
	setString(&c.HealthAddress, DefaultHealthAddress)
	setDuration(&c.CycleInterval, DefaultCycleInterval)
	setString(&c.GPUResourceName, DefaultGPUResourceName)
	setString(&c.DRADriver, DefaultDRADriver)
	setString(&c.RuntimeHistory, DefaultRuntimeHistory)

	le := &c.LeaderElection
	if le.Enabled == nil {
		on := true
		le.Enabled = &on
	}
	setString(&le.Namespace, DefaultLeaderElectionNamespace)
	setString(&le.LeaseName, DefaultLeaseName)
	setDuration(&le.LeaseDuration, DefaultLeaseDuration)
	setDuration(&le.RenewDeadline, DefaultRenewDeadline)
	setDuration(&le.RetryPeriod, DefaultRetryPeriod)
}

func setString(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func setDuration(d *metav1.Duration, def metav1.Duration) {
	if d.Duration == 0 {
		*d = def
	}
}

// IsEnabled reports whether leader election is on (unset means on).
func (le *LeaderElectionConfiguration) IsEnabled() bool {
	return le.Enabled == nil || *le.Enabled
}

// Validate checks a defaulted configuration. The error lists every problem,
// each with its field path.
func (c *SchedulerConfiguration) Validate() error {
	var errs field.ErrorList
	if c.APIVersion != GroupVersion.String() {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), c.APIVersion, []string{GroupVersion.String()}))
	}
	if c.Kind != SchedulerConfigurationKind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), c.Kind, []string{SchedulerConfigurationKind}))
	}
	// The API server validates spec.schedulerName as a DNS subdomain.
	errs = append(errs, dnsSubdomain(field.NewPath("schedulerName"), c.SchedulerName)...)
	errs = append(errs, address(field.NewPath("metricsAddress"), c.MetricsAddress)...)
	errs = append(errs, address(field.NewPath("healthAddress"), c.HealthAddress)...)
	if c.MetricsAddress != AddressOff && c.MetricsAddress == c.HealthAddress {
		errs = append(errs, field.Invalid(field.NewPath("healthAddress"), c.HealthAddress, "must differ from metricsAddress"))
	}
	errs = append(errs, positive(field.NewPath("cycleInterval"), c.CycleInterval)...)
	if c.TopologyName != "" {
		errs = append(errs, dnsSubdomain(field.NewPath("topologyName"), c.TopologyName)...)
	}
	errs = append(errs, gpuResource(field.NewPath("gpuResourceName"), c.GPUResourceName)...)
	errs = append(errs, dnsSubdomain(field.NewPath("draDriver"), c.DRADriver)...)
	if _, err := labels.Parse(c.ManagedNodeSelector); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("managedNodeSelector"), c.ManagedNodeSelector, err.Error()))
	}
	errs = append(errs, c.LeaderElection.validate(field.NewPath("leaderElection"))...)
	if c.RuntimeHistory != RuntimeHistoryOff {
		if _, _, err := SplitRuntimeHistory(c.RuntimeHistory, c.LeaderElection.Namespace); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("runtimeHistory"), c.RuntimeHistory, err.Error()))
		}
	}
	bp := field.NewPath("backfill")
	if m := c.Backfill.OnMaxRuntime; m != "" && m != "Terminate" && m != "Requeue" {
		errs = append(errs, field.NotSupported(bp.Child("onMaxRuntime"), m, []string{"Terminate", "Requeue"}))
	}
	if c.Backfill.MaxReservationsPerQueue < 0 {
		errs = append(errs, field.Invalid(bp.Child("maxReservationsPerQueue"), c.Backfill.MaxReservationsPerQueue, "must not be negative"))
	}
	if g := c.Preemption.ReclaimGrace.Duration; g < 0 {
		errs = append(errs, field.Invalid(field.NewPath("preemption", "reclaimGrace"), g.String(), "must not be negative"))
	}
	if _, err := c.Preemption.MaxLostPerWork.Float(); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("preemption", "maxLostPerWork"), string(c.Preemption.MaxLostPerWork), err.Error()))
	}
	names := map[string]bool{}
	for i, pl := range c.Pools {
		p := field.NewPath("pools").Index(i)
		switch {
		case pl.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case names[pl.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), pl.Name))
		}
		names[pl.Name] = true
		if pl.Class == "" {
			errs = append(errs, field.Required(p.Child("class"), "the corral.dev/class of the jobs the pool is for"))
		}
		if len(pl.NodeLabels) == 0 && pl.GPUs <= 0 {
			errs = append(errs, field.Required(p.Child("nodeLabels"), "give nodeLabels or a positive gpus"))
		}
		if pl.Others != "" && pl.Others != "Closed" && pl.Others != "Preemptible" {
			errs = append(errs, field.NotSupported(p.Child("others"), pl.Others, []string{"Closed", "Preemptible"}))
		}
	}
	for i, sp := range c.Spares {
		p := field.NewPath("spares").Index(i)
		if sp.Level == "" {
			errs = append(errs, field.Required(p.Child("level"), "a topology level, e.g. rack"))
		}
		if sp.GPUs <= 0 {
			errs = append(errs, field.Invalid(p.Child("gpus"), sp.GPUs, "must be positive"))
		}
	}
	return errs.ToAggregate()
}

// validate applies client-go's leader-election rules, so that a bad
// configuration fails at load time rather than when the elector starts.
func (le *LeaderElectionConfiguration) validate(p *field.Path) field.ErrorList {
	if !le.IsEnabled() {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(le.Namespace) {
		errs = append(errs, field.Invalid(p.Child("namespace"), le.Namespace, msg))
	}
	errs = append(errs, dnsSubdomain(p.Child("leaseName"), le.LeaseName)...)
	errs = append(errs, positive(p.Child("leaseDuration"), le.LeaseDuration)...)
	errs = append(errs, positive(p.Child("renewDeadline"), le.RenewDeadline)...)
	errs = append(errs, positive(p.Child("retryPeriod"), le.RetryPeriod)...)
	if len(errs) > 0 {
		return errs
	}
	if le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
		errs = append(errs, field.Invalid(p.Child("leaseDuration"), le.LeaseDuration.Duration.String(), "must be greater than renewDeadline"))
	}
	if float64(le.RenewDeadline.Duration) <= leaderElectionJitter*float64(le.RetryPeriod.Duration) {
		errs = append(errs, field.Invalid(p.Child("renewDeadline"), le.RenewDeadline.Duration.String(), "must be greater than 1.2 × retryPeriod"))
	}
	return errs
}

func dnsSubdomain(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func positive(p *field.Path, d metav1.Duration) field.ErrorList {
	if d.Duration <= 0 {
		return field.ErrorList{field.Invalid(p, d.Duration.String(), "must be a positive duration")}
	}
	return nil
}

// address accepts host:port with a numeric port (the host may be empty: all
// interfaces), or AddressOff.
func address(p *field.Path, v string) field.ErrorList {
	if v == AddressOff {
		return nil
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return field.ErrorList{field.Invalid(p, v, "want host:port, e.g. \":8080\" or \"127.0.0.1:8080\", or \"0\" (off)")}
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return field.ErrorList{field.Invalid(p, v, "port must be a number from 1 to 65535")}
	}
	return nil
}

// gpuResource accepts an extended resource name: a label-key-shaped name
// with a domain prefix.
func gpuResource(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	if len(errs) == 0 && !strings.Contains(v, "/") {
		errs = append(errs, field.Invalid(p, v, "an extended resource needs a domain prefix, e.g. nvidia.com/gpu"))
	}
	return errs
}

// SplitRuntimeHistory reads a runtimeHistory value, "name" or
// "namespace/name", into the ConfigMap's namespace (ns when none is given)
// and name.
func SplitRuntimeHistory(v, ns string) (namespace, name string, err error) {
	namespace, name = ns, v
	if i := strings.IndexByte(v, '/'); i >= 0 {
		namespace, name = v[:i], v[i+1:]
	}
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return "", "", fmt.Errorf("namespace %q: %s", namespace, strings.Join(msgs, "; "))
	}
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return "", "", fmt.Errorf("ConfigMap name %q: %s", name, strings.Join(msgs, "; "))
	}
	return namespace, name, nil
}
