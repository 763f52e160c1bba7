package placement

import (
	"math"
	"testing"

	"github.com/corral-dev/corral/internal/build"
	"github.com/corral-dev/corral/internal/cluster"
	"github.com/corral-dev/corral/internal/workload"
)

// gradientOnly is FGD's plain fragmentation gradient: FragScorer with the
// stranding term taken back out, to show where the term changes a choice.
type gradientOnly struct{ *FragScorer }

func (g gradientOnly) Score(s *cluster.State, n int, r *PodReq) (float64, int) {
	score, gpu := g.FragScorer.Score(s, n, r)
	var total int64
	for _, x := range s.GPUFree(n) {
		total += int64(x)
	}
	strand := g.stranded(total-r.GPUMilliTotal(), s.FreeCPU(n)-r.CPUMilli, s.FreeMem(n)-r.MemMiB) -
		g.stranded(total, s.FreeCPU(n), s.FreeMem(n))
	return score + strandWeight*strand, gpu
}

// oneGPU is the usual pod of the test mixes: one whole GPU and 10 cores.
var oneGPU = workload.Request{GPUs: 1, CPUMilli: 10000}

func TestFragScorerCountsStranding(t *testing.T) {
	node := func(name string, gpus int, cores, memGiB int64) []cluster.Node {
		return []cluster.Node{build.Node().Name(name).GPUs(gpus).CPU(cores * 1000).Mem(memGiB << 10).Obj()}
	}
	cases := map[string]struct {
		mix   Mix
		a, b  []cluster.Node // a sorts first: plain FGD's ties go to it
		pod   workload.Request
		want  string // node the scorer picks
		plain string // node the gradient alone picks
	}{
		// On a the CPU-only pod leaves 10 cores for 4 free GPUs: every pod of
		// the mix still fits once, so the gradient is 0 on both nodes, but a
		// could then run one 10-core pod and strands 3 GPUs; b keeps 70 cores.
		"a CPU-only pod avoids the node whose GPUs it would strand": {
			mix: Mix{{Request: oneGPU, Weight: 1}},
			a:   node("a", 4, 40, 1024), b: node("b", 4, 100, 1024),
			pod:  workload.Request{CPUMilli: 30000},
			want: "b", plain: "a",
		},
		// A 20-core GPU pod on a leaves 28 cores for 3 GPUs (2.8 pods of the
		// mix); on b its extra CPU is there to spare.
		"a CPU-heavy GPU pod goes where CPU is plentiful": {
			mix: Mix{{Request: oneGPU, Weight: 1}},
			a:   node("a", 4, 48, 1024), b: node("b", 4, 200, 1024),
			pod:  workload.Request{GPUs: 1, CPUMilli: 20000},
			want: "b", plain: "a",
		},
		// The mix asks 100 GiB per GPU: 150 GiB taken on a leave 250 GiB for
		// 4 GPUs, so memory strands 1.5 of them.
		"memory strands GPUs as CPU does": {
			mix: Mix{{Request: workload.Request{GPUs: 1, CPUMilli: 10000, MemMiB: 100 << 10}, Weight: 1}},
			a:   node("a", 4, 400, 400), b: node("b", 4, 400, 2048),
			pod:  workload.Request{CPUMilli: 1000, MemMiB: 150 << 10},
			want: "b", plain: "a",
		},
		// CPU is plentiful on both nodes: the gradient decides, keeping a's
		// four GPUs whole for the 4-GPU pods of the mix.
		"without stranding the gradient decides": {
			mix: Mix{{Request: oneGPU, Weight: 0.5}, {Request: workload.Request{GPUs: 4, CPUMilli: 40000}, Weight: 0.5}},
			a:   node("a", 4, 200, 1024), b: node("b", 2, 200, 1024),
			pod:  oneGPU,
			want: "b", plain: "b",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pick := func(scorer func(s *cluster.State) Scorer) string {
				s := build.State(build.Topo(), tc.a, tc.b)
				pod, _ := Resolve(s, workload.PodRef{Job: "p"}, tc.pod)
				res := NewPlacer(s, scorer(s), Interconnect).PlaceGang(Gang{Pods: []PodReq{pod}, Required: -1, Preferred: -1})
				if res.Failure != nil {
					t.Fatalf("not placed: %s", res.Failure.Message)
				}
				return s.Node(res.Assignments[0].Node).Name
			}
			got := pick(func(s *cluster.State) Scorer { return NewFragScorer(s, tc.mix, nil) })
			plain := pick(func(s *cluster.State) Scorer { return gradientOnly{NewFragScorer(s, tc.mix, nil)} })
			if got != tc.want || plain != tc.plain {
				t.Errorf("picked %s (gradient alone %s), want %s (gradient alone %s)", got, plain, tc.want, tc.plain)
			}
		})
	}
}

func TestStranded(t *testing.T) {
	// A mix of 11-core, 40-GiB GPU pods, and CPU-only pods that do not count.
	mix := Mix{
		{Request: workload.Request{GPUs: 1, CPUMilli: 11000, MemMiB: 40 << 10}, Weight: 0.6},
		{Request: workload.Request{CPUMilli: 32000, MemMiB: 64 << 10}, Weight: 0.4},
	}
	s := build.State(build.Topo(), build.Node().Times(1))
	f := NewFragScorer(s, mix, nil)
	cases := map[string]struct {
		gpu, cpu, mem int64
		want          float64
	}{
		"8 GPUs, 64 cores: 64/11 GPUs served": {gpu: 8000, cpu: 64000, mem: 1 << 20, want: 8000 - 64000.0/11},
		"memory is the scarcer":               {gpu: 8000, cpu: 96000, mem: 200 << 10, want: 3000},
		"enough of both":                      {gpu: 4000, cpu: 96000, mem: 1 << 20, want: 0},
		"no free GPU":                         {gpu: 0, cpu: 0, mem: 0, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := f.stranded(tc.gpu, tc.cpu, tc.mem); math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("stranded(%d, %d, %d) = %.3f, want %.3f", tc.gpu, tc.cpu, tc.mem, got, tc.want)
			}
		})
	}
}

func TestNodeFragLeavesStrandingOut(t *testing.T) {
	// 4 free GPUs and 10 cores: one pod of the mix still fits, so the paper's
	// fragmentation is 0 although 3 GPUs are stranded.
	s := build.State(build.Topo(), build.Node().GPUs(4).CPU(10000).Times(1))
	f := NewFragScorer(s, Mix{{Request: oneGPU, Weight: 1}}, nil)
	if got := f.NodeFrag(s, 0); got != 0 {
		t.Errorf("NodeFrag = %v, want 0", got)
	}
	if got := f.stranded(4000, 10000, s.FreeMem(0)); got != 3000 {
		t.Errorf("stranded = %v, want 3000", got)
	}
}
