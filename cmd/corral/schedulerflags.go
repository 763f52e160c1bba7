package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/corral-dev/corral/api/v1alpha1"
)

// flagOfField names the scheduler flag that sets each field of a
// SchedulerConfiguration, so that a bad flag is reported by its own name.
var flagOfField = map[string]string{
	"schedulerName":                    "scheduler-name",
	"metricsAddress":                   "metrics-address",
	"healthAddress":                    "health-address",
	"cycleInterval":                    "cycle-interval",
	"topologyName":                     "topology",
	"gpuResourceName":                  "gpu-resource",
	"draDriver":                        "dra-driver",
	"managedNodeSelector":              "node-selector",
	"runtimeHistory":                   "runtime-history",
	"leaderElection.namespace":         "leader-elect-namespace",
	"leaderElection.leaseName":         "leader-elect-name",
	"leaderElection.leaseDuration":     "leader-elect-lease-duration",
	"leaderElection.renewDeadline":     "leader-elect-renew-deadline",
	"leaderElection.retryPeriod":       "leader-elect-retry-period",
	"backfill.onMaxRuntime":            "on-max-runtime",
	"backfill.maxReservationsPerQueue": "reservations-per-queue",
	"preemption.reclaimGrace":          "reclaim-grace",
	"preemption.maxLostPerWork":        "max-lost-per-work",
}

// validate checks the flags (after the configuration file filled those not
// given) by the configuration file's own rules, before anything connects:
// a flag the adapter would otherwise replace with its default
// (--cycle-interval -1s, --scheduler-name "") or that would fail only once
// the scheduler runs (--metrics-address equal to --health-address) is an
// error naming the flag.
func (o schedulerOptions) validate() error {
	c := o.configuration()
	var msgs []string
	if err := c.Validate(); err != nil {
		var agg utilerrors.Aggregate
		if !errors.As(err, &agg) {
			return err
		}
		for _, e := range agg.Errors() {
			msgs = append(msgs, flagError(e))
		}
	}
	if o.qps <= 0 {
		msgs = append(msgs, fmt.Sprintf("--kube-api-qps %g: must be positive", o.qps))
	}
	if o.burst < 1 {
		msgs = append(msgs, fmt.Sprintf("--kube-api-burst %d: must be at least 1", o.burst))
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// serveAddress is the address to serve on, "" for off: a flag may say off
// as the configuration file does ("0") or as empty.
func serveAddress(a string) string {
	if a == v1alpha1.AddressOff {
		return ""
	}
	return a
}

// configuration is the options as a SchedulerConfiguration, with the flags'
// spellings of "off" ("" for an address or the runtime history) turned into
// the file's. --on-max-runtime and --spares are adapterOptions' to check.
func (o schedulerOptions) configuration() v1alpha1.SchedulerConfiguration {
	off := func(v string) string {
		if v == "" {
			return v1alpha1.AddressOff
		}
		return v
	}
	history := o.runtimeHistory
	if history == "" {
		history = v1alpha1.RuntimeHistoryOff
	}
	elect := o.leaderElect
	c := v1alpha1.SchedulerConfiguration{
		SchedulerName: o.name, MetricsAddress: off(o.metricsAddr), HealthAddress: off(o.healthAddr),
		CycleInterval: metav1.Duration{Duration: o.cycle}, TopologyName: o.topology,
		GPUResourceName: o.gpuResource, DRADriver: o.draDriver, ManagedNodeSelector: o.nodeSelector,
		RuntimeHistory: history, Pools: o.pools,
		LeaderElection: v1alpha1.LeaderElectionConfiguration{Enabled: &elect, Namespace: o.leaseNS, LeaseName: o.leaseName,
			LeaseDuration: metav1.Duration{Duration: o.leaseDuration}, RenewDeadline: metav1.Duration{Duration: o.renewDeadline},
			RetryPeriod: metav1.Duration{Duration: o.retryPeriod}},
	}
	c.APIVersion, c.Kind = v1alpha1.GroupVersion.String(), v1alpha1.SchedulerConfigurationKind
	c.Backfill.MaxReservationsPerQueue = o.reservationsPerQueue
	c.Preemption.ReclaimGrace = metav1.Duration{Duration: o.reclaimGrace}
	// The flag parses any float; the file's rules turn away NaN and Inf.
	c.Preemption.MaxLostPerWork = v1alpha1.Decimal(strconv.FormatFloat(o.maxLostPerWork, 'g', -1, 64))
	return c
}

// flagError words one configuration problem with the flag's name and value.
func flagError(err error) string {
	var fe *field.Error
	if !errors.As(err, &fe) {
		return err.Error()
	}
	flag, ok := flagOfField[fe.Field]
	if !ok {
		return fe.Error()
	}
	v := fmt.Sprint(fe.BadValue)
	if v == "" {
		v = `""`
	}
	detail := fe.Detail
	if detail == "" {
		detail = fe.Type.String()
	}
	return fmt.Sprintf("--%s %s: %s", flag, v, fieldsAsFlags.Replace(detail))
}

// fieldsAsFlags rewrites the other fields a rule names ("must be greater
// than renewDeadline") as their flags; only camelCase names, so that a
// plain word (namespace) stays as it is.
var fieldsAsFlags = func() *strings.Replacer {
	var pairs []string
	for _, f := range slices.Sorted(maps.Keys(flagOfField)) {
		name := f[strings.LastIndexByte(f, '.')+1:]
		if strings.ToLower(name) != name {
			pairs = append(pairs, name, "--"+flagOfField[f])
		}
	}
	return strings.NewReplacer(pairs...)
}()
