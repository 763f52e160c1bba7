package fgdtry

import (
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/data"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/engine"
	"github.com/corral-dev/corral/internal/sim"
	"github.com/corral-dev/corral/internal/workload"
)

func rows(t *testing.T, name string) [][]string {
	f, err := data.FS.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return r[1:]
}
func atoi(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }

func TestFGD(t *testing.T) {
	var nodes []cluster.Node
	for _, r := range rows(t, "openb/openb_node_list_gpu_node.csv") {
		n := cluster.Node{Name: r[0], CPUMilli: atoi(r[1]), MemMiB: atoi(r[2])}
		for i := 0; i < int(atoi(r[3])); i++ {
			n.Devices = append(n.Devices, cluster.Device{ID: fmt.Sprint("gpu", i), Model: r[4], NVLink: -1, PCIeSwitch: i / 2})
		}
		nodes = append(nodes, n)
	}
	var jobs []sim.Job
	for _, r := range rows(t, "openb/openb_pod_list_default.csv") {
		req := workload.Request{CPUMilli: atoi(r[1]), MemMiB: atoi(r[2]), GPUs: int(atoi(r[3]))}
		if m := int(atoi(r[4])); req.GPUs == 1 && m < 1000 {
			req.GPUMilli = m
		}
		if r[5] != "" {
			req.Models = strings.Split(r[5], "|")
		}
		jobs = append(jobs, sim.Job{Job: &workload.Job{ID: workload.JobID(r[0]), PodSets: []workload.PodSet{{Count: 1, Request: req}}}})
	}
	for _, p := range []engine.Policy{engine.Corral} {
		t0 := time.Now()
		res, _, err := sim.Run(sim.Input{Nodes: nodes, Jobs: jobs}, sim.Config{Policy: p, Protocol: sim.FGD, Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v frag %.2f  dec %.1fus  %s", p, res.Summary.UnallocatedAt, res.Summary.FragPct, res.Summary.DecisionMeanUS, time.Since(t0))
	}
}
