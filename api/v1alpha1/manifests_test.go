package v1alpha1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// The manifests users apply: every document under these directories must
// decode strictly (no unknown or duplicate fields) into a known type.
const (
	deployDir   = "../../deploy"
	examplesDir = "../../examples"
	crdFile     = deployDir + "/crds/corral.dev_corraltopologies.yaml"
)

// doc is one YAML document of a manifest file.
type doc struct {
	file string
	raw  []byte
	obj  runtime.Object // typed; nil for CRDs and the Kustomization
	kind string
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// readDocs splits every .yaml file under dir into documents and decodes them.
// CustomResourceDefinitions and the Kustomization are not in client-go's
// scheme: they are returned undecoded (obj nil) for the checks below.
func readDocs(t *testing.T, dir string) []doc {
	t.Helper()
	dec := serializer.NewCodecFactory(testScheme(t), serializer.EnableStrict).UniversalDeserializer()
	var out []doc
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "sim" {
			// examples/sim holds corral sim's own input files, not
			// manifests; cmd/corral's TestExamplesSimulate runs them.
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		r := utilyaml.NewYAMLReader(bufio.NewReader(f))
		for {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			var meta struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal(raw, &meta); err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			if meta.Kind == "" {
				if len(bytes.TrimSpace(stripComments(raw))) > 0 {
					t.Errorf("%s: a document without a kind", path)
				}
				continue
			}
			dc := doc{file: path, raw: raw, kind: meta.Kind}
			switch meta.Kind {
			case "CustomResourceDefinition", "Kustomization":
			default:
				obj, _, err := dec.Decode(raw, nil, nil)
				if err != nil {
					t.Errorf("%s: %s: %v", path, meta.Kind, err)
					continue
				}
				dc.obj = obj
			}
			out = append(out, dc)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("no manifests under %s", dir)
	}
	return out
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

func find[T runtime.Object](t *testing.T, docs []doc, name string) T {
	t.Helper()
	for _, d := range docs {
		if o, ok := d.obj.(T); ok {
			if m, ok := any(o).(interface{ GetName() string }); ok && m.GetName() == name {
				return o
			}
		}
	}
	var zero T
	t.Fatalf("no %T named %q", zero, name)
	return zero
}

func TestDeployManifests(t *testing.T) {
	docs := readDocs(t, deployDir)

	// The kustomization lists every manifest file, and nothing else.
	kust, err := os.ReadFile(filepath.Join(deployDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(kust, &k); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, d := range docs {
		rel, _ := filepath.Rel(deployDir, d.file)
		if rel != "kustomization.yaml" && !slices.Contains(files, rel) {
			files = append(files, rel)
		}
	}
	slices.Sort(files)
	slices.Sort(k.Resources)
	if diff := cmp.Diff(files, k.Resources); diff != "" {
		t.Errorf("kustomization.yaml resources (-files +listed):\n%s", diff)
	}

	// The configuration in the ConfigMap loads, and spells out the defaults.
	cm := find[*corev1.ConfigMap](t, docs, "corral-config")
	cfg, err := ParseConfig([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("ConfigMap corral-config: %v", err)
	}
	if diff := cmp.Diff(defaults(), cfg); diff != "" {
		t.Errorf("deploy/config.yaml differs from the defaults (-defaults +file):\n%s", diff)
	}

	// The Deployment runs `corral scheduler --config` on the mounted file,
	// as the ServiceAccount the RBAC binds, with the probes on the health
	// port and the ports the configuration names.
	dep := find[*appsv1.Deployment](t, docs, "corral-scheduler")
	if dep.Namespace != cfg.LeaderElection.Namespace {
		t.Errorf("Deployment namespace %q, Lease namespace %q", dep.Namespace, cfg.LeaderElection.Namespace)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 2 {
		t.Errorf("Deployment replicas = %v, want 2", dep.Spec.Replicas)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if got := strings.Join(c.Command, " "); got != "corral scheduler --config /etc/corral/config.yaml" {
		t.Errorf("command = %q", got)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/corral" ||
		pod.Volumes[0].ConfigMap == nil || pod.Volumes[0].ConfigMap.Name != cm.Name {
		t.Errorf("the ConfigMap %s is not mounted at /etc/corral", cm.Name)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if diff := cmp.Diff(map[string]int32{"metrics": 8080, "health": 8081}, ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	if p := c.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "health" {
		t.Errorf("liveness probe: %+v", p)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" || p.HTTPGet.Port.String() != "health" {
		t.Errorf("readiness probe: %+v", p)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("the scheduler must run as non-root with a read-only root filesystem")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Error("the scheduler has no resource requests")
	}
	sa := find[*corev1.ServiceAccount](t, docs, pod.ServiceAccountName)
	crb := find[*rbacv1.ClusterRoleBinding](t, docs, "corral-scheduler")
	if s := crb.Subjects[0]; s.Name != sa.Name || s.Namespace != sa.Namespace {
		t.Errorf("ClusterRoleBinding subject %s/%s, ServiceAccount %s/%s", s.Namespace, s.Name, sa.Namespace, sa.Name)
	}

	// The leader-election Role lives where the Lease does and names it.
	role := find[*rbacv1.Role](t, docs, "corral-scheduler-leader-election")
	if role.Namespace != cfg.LeaderElection.Namespace {
		t.Errorf("Role namespace %q, Lease namespace %q", role.Namespace, cfg.LeaderElection.Namespace)
	}
	var named bool
	for _, r := range role.Rules {
		if slices.Contains(r.Verbs, "update") && slices.Contains(r.ResourceNames, cfg.LeaderElection.LeaseName) {
			named = true
		}
	}
	if !named {
		t.Errorf("the Role does not let the scheduler update Lease %q", cfg.LeaderElection.LeaseName)
	}
}

// TestClusterRole pins the scheduler's permissions: what it needs, and no
// more (no deletes, no secrets, no writes to nodes).
func TestClusterRole(t *testing.T) {
	cr := find[*rbacv1.ClusterRole](t, readDocs(t, deployDir), "corral-scheduler")
	got := map[string][]string{} // group/resource -> verbs
	for _, r := range cr.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := g + "/" + res
				got[key] = append(got[key], r.Verbs...)
				slices.Sort(got[key])
			}
		}
	}
	read := []string{"get", "list", "watch"}
	want := map[string][]string{
		"/pods":                                     {"get", "list", "patch", "watch"},
		"/pods/binding":                             {"create"},
		"/pods/status":                              {"patch", "update"},
		"/pods/eviction":                            {"create"},
		"/nodes":                                    {"get", "list", "patch", "watch"}, // MIG re-partitions are recorded on the node
		"/events":                                   {"create", "patch", "update"},
		"/namespaces":                               read, // pod affinity's namespaceSelector matches namespace labels
		"events.k8s.io/events":                      {"create", "patch", "update"},
		"resource.k8s.io/resourceslices":            read,
		"resource.k8s.io/deviceclasses":             read,
		"resource.k8s.io/resourceclaims":            {"get", "list", "patch", "update", "watch"},
		"resource.k8s.io/resourceclaims/status":     {"patch", "update"},
		"resource.k8s.io/resourceclaims/binding":    {"patch", "update"},
		"scheduling.k8s.io/priorityclasses":         read,
		"scheduling.k8s.io/podgroups":               read,
		"scheduling.k8s.io/podgroups/status":        {"patch", "update"},
		"batch/jobs":                                read,
		"jobset.x-k8s.io/jobsets":                   read,
		"leaderworkerset.x-k8s.io/leaderworkersets": read,
		"ray.io/rayclusters":                        read,
		"corral.dev/corraltopologies":               read,
		"corral.dev/corraltopologies/status":        {"patch", "update"},
		"corral.dev/corralqueues":                   read,
		"corral.dev/corralqueues/status":            {"patch", "update"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClusterRole corral-scheduler (-want +got):\n%s", diff)
	}
}

func TestExamples(t *testing.T) {
	docs := readDocs(t, examplesDir)

	topo := find[*Topology](t, docs, "default")
	if err := topo.Validate(); err != nil {
		t.Errorf("examples/topology.yaml: %v", err)
	}
	var levelNames []string
	for _, l := range topo.Spec.Levels {
		levelNames = append(levelNames, l.Name+"="+l.NodeLabel)
	}
	if diff := cmp.Diff([]string{"block=corral.dev/block", "rack=corral.dev/rack"}, levelNames); diff != "" {
		t.Errorf("example topology levels (-want +got):\n%s", diff)
	}

	job := find[*batchv1.Job](t, docs, "train-rack")
	tmpl := job.Spec.Template
	if *job.Spec.Parallelism != 4 || *job.Spec.Completions != 4 {
		t.Errorf("parallelism/completions = %d/%d, want 4/4", *job.Spec.Parallelism, *job.Spec.Completions)
	}
	if tmpl.Spec.SchedulerName != SchedulerName || tmpl.Labels[LabelQueue] != "default" ||
		tmpl.Annotations[AnnotationRequiredTopology] != "rack" {
		t.Errorf("gang job template: schedulerName %q, labels %v, annotations %v", tmpl.Spec.SchedulerName, tmpl.Labels, tmpl.Annotations)
	}
	if gpus := tmpl.Spec.Containers[0].Resources.Limits[ResourceGPU]; gpus.Value() != 8 {
		t.Errorf("%s = %v, want 8", ResourceGPU, gpus.String())
	}
	if !slices.ContainsFunc(topo.Spec.Levels, func(l TopologyLevel) bool { return l.Name == tmpl.Annotations[AnnotationRequiredTopology] }) {
		t.Errorf("the job asks for a level the example topology lacks")
	}

	dc := find[*resourcev1.DeviceClass](t, docs, DefaultDRADriver)
	if len(dc.Spec.Selectors) != 1 || dc.Spec.Selectors[0].CEL.Expression != "device.driver == 'gpu.nvidia.com'" {
		t.Errorf("DeviceClass selectors: %+v", dc.Spec.Selectors)
	}
	rct := find[*resourcev1.ResourceClaimTemplate](t, docs, "two-gpus-same-pcie-root")
	dev := rct.Spec.Spec.Devices
	if len(dev.Requests) != 1 || dev.Requests[0].Exactly == nil ||
		dev.Requests[0].Exactly.DeviceClassName != dc.Name || dev.Requests[0].Exactly.Count != 2 {
		t.Errorf("claim requests: %+v", dev.Requests)
	}
	if len(dev.Constraints) != 1 || dev.Constraints[0].MatchAttribute == nil ||
		*dev.Constraints[0].MatchAttribute != "resource.kubernetes.io/pcieRoot" {
		t.Errorf("claim constraints: %+v", dev.Constraints)
	}
	p := find[*corev1.Pod](t, docs, "two-gpus")
	if p.Spec.SchedulerName != SchedulerName || len(p.Spec.ResourceClaims) != 1 ||
		*p.Spec.ResourceClaims[0].ResourceClaimTemplateName != rct.Name {
		t.Errorf("DRA pod: schedulerName %q, claims %+v", p.Spec.SchedulerName, p.Spec.ResourceClaims)
	}

	// The sample nodes carry every level's label, so the Topology sees them all.
	var nodes int
	for _, d := range docs {
		n, ok := d.obj.(*corev1.Node)
		if !ok {
			continue
		}
		nodes++
		for _, l := range topo.Spec.Levels {
			if n.Labels[l.NodeLabel] == "" {
				t.Errorf("sample node %s lacks label %s", n.Name, l.NodeLabel)
			}
		}
	}
	if nodes == 0 {
		t.Error("examples/sample-cluster.yaml has no nodes")
	}
}
