package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// CRDResource is the GroupVersionResource of CustomResourceDefinitions.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ReadObjects decodes every document of a YAML (or JSON) file; empty
// documents are skipped.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out, nil
}

// InstallCRDs creates the CustomResourceDefinitions of every *.yaml file in
// dir (one that exists already is left as it is) and waits until each is
// Established and listed by discovery, so that clients started afterwards
// see the new resources. Bounded by DefaultWaitTimeout.
func (c *Cluster) InstallCRDs(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	if len(files) == 0 {
		return fmt.Errorf("no CRD files (*.yaml) in %s", dir)
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		objs, err := ReadObjects(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				return fmt.Errorf("%s: %s %s is not a CustomResourceDefinition", f, o.GetKind(), o.GetName())
			}
			if _, err := c.Dynamic.Resource(CRDResource).Create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating CRD %s from %s: %w", o.GetName(), f, err)
			}
			crds = append(crds, o)
		}
	}
	for _, o := range crds {
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(o.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		var served []string
		for _, v := range versions {
			if m, ok := v.(map[string]any); ok && m["served"] == true {
				if name, ok := m["name"].(string); ok {
					served = append(served, group+"/"+name)
				}
			}
		}
		last := ""
		err := c.poll(ctx, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
			got, err := c.Dynamic.Resource(CRDResource).Get(ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if !crdEstablished(got) {
				last = "not Established yet"
				return false, nil
			}
			for _, gv := range served {
				list, err := c.Client.Discovery().ServerResourcesForGroupVersion(gv)
				if err != nil {
					last = fmt.Sprintf("discovery of %s: %v", gv, err)
					return false, nil
				}
				found := false
				for _, r := range list.APIResources {
					found = found || r.Name == plural
				}
				if !found {
					last = fmt.Sprintf("%s not listed in %s yet", plural, gv)
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not served: %w; last seen: %s", o.GetName(), err, last)
		}
	}
	return nil
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, cond := range conds {
		if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// CreateObjects creates objects of any kind the API server serves (CRDs
// included, once InstallCRDs has returned), resolving kinds to resources
// through discovery. Namespaced objects without a namespace go to
// "default". It stops at the first error.
func (c *Cluster) CreateObjects(ctx context.Context, objs ...*unstructured.Unstructured) error {
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			mapper.Reset() // discovery may predate a CRD
			mapping, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		ri := c.Dynamic.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			_, err = ri.Namespace(ns).Create(ctx, o, metav1.CreateOptions{})
		} else {
			_, err = ri.Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			return fmt.Errorf("creating %s %s: %w", gvk.Kind, o.GetName(), err)
		}
	}
	return nil
}

// CreateFromFile creates every object of a YAML file (see CreateObjects).
func (c *Cluster) CreateFromFile(ctx context.Context, path string) error {
	objs, err := ReadObjects(path)
	if err != nil {
		return err
	}
	return c.CreateObjects(ctx, objs...)
}

// Alive returns an error naming every control-plane component that has
// exited without being stopped, and nil while all of them run. Long-running
// users of StartCluster (`corral dev up`) poll it.
func (c *Cluster) Alive() error { return c.checkAlive() }
