package main

// corral jobs / queues / nodes: the cluster as corral sees it, read with the
// user's kubeconfig as kubectl reads it. Installed as kubectl-corral (a
// symlink to this binary), they are also `kubectl corral jobs` etc.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// getFlags are the kubectl-like flags the listing commands share.
type getFlags struct {
	kubeconfig    string
	context       string
	namespace     string
	allNamespaces bool
	output        string
	schedulerName string
}

func (f *getFlags) add(cmd *cobra.Command, namespaced bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then in-cluster)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context (default: the current one)")
	fl.StringVarP(&f.output, "output", "o", "", "wide, json or yaml (default: a table)")
	fl.StringVar(&f.schedulerName, "scheduler-name", "corral", "the scheduler's name (spec.schedulerName of its pods)")
	if namespaced {
		fl.StringVarP(&f.namespace, "namespace", "n", "", "namespace (default: the context's)")
		fl.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "every namespace")
	}
}

func (f *getFlags) validate() error {
	switch f.output {
	case "", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("-o %q: want wide, json or yaml", f.output)
}

// newClients is f.clients; tests put fake clientsets in its place.
var newClients = (*getFlags).clients

// clients builds the clients from the kubeconfig the way kubectl does, and
// the namespace to list ("" for all).
func (f *getFlags) clients() (kubernetes.Interface, dynamic.Interface, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, nil, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	ns := f.namespace
	if ns == "" && !f.allNamespaces {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, nil, "", err
		}
	}
	if f.allNamespaces {
		ns = ""
	}
	client, dyn, err := clientsFor(cfg)
	if err != nil {
		return nil, nil, "", err
	}
	return client, dyn, ns, nil
}

// table is what a listing prints: the columns of the default view, the ones
// -o wide adds, and the rows as structured values for -o json / yaml.
type table struct {
	header, wideHeader []string
	rows, wideRows     [][]string
	items              any // a slice of the row types, for json / yaml
}

func (t table) print(w io.Writer, output string) error {
	switch output {
	case "json":
		b, err := json.MarshalIndent(map[string]any{"items": t.items}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(map[string]any{"items": t.items})
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if len(t.rows) == 0 {
		_, err := fmt.Fprintln(w, "No resources found.")
		return err
	}
	// kubectl's own layout: columns padded by three spaces.
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	header := t.header
	if output == "wide" {
		header = append(append([]string(nil), header...), t.wideHeader...)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for i, r := range t.rows {
		if output == "wide" {
			r = append(append([]string(nil), r...), t.wideRows[i]...)
		}
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// dash stands for an empty cell, as kubectl prints <none>.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age renders a duration as kubectl does: 45s, 12m, 3h, 5d.
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// listCmd builds one of the listing commands around its lister.
// noEmptyNames refuses a name flag set to "" (--gpu-resource=,
// --scheduler-name=): the listing would match nothing and print zeros, as
// if the cluster were empty.
func noEmptyNames(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(fl *pflag.Flag) {
		if err == nil && fl.Value.Type() == "string" && fl.DefValue != "" && fl.Value.String() == "" {
			err = fmt.Errorf("--%s: must not be empty (default %s)", fl.Name, fl.DefValue)
		}
	})
	return err
}

func listCmd(use, short, long string, namespaced bool, extra func(*cobra.Command),
	list func(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, ns string, f *getFlags) (table, error)) *cobra.Command {
	var f getFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if err := noEmptyNames(cmd.Flags()); err != nil {
				return err
			}
			client, dyn, ns, err := newClients(&f)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 60*time.Second)
			defer cancel()
			t, err := list(ctx, client, dyn, ns, &f)
			if err != nil {
				return err
			}
			return t.print(cmd.OutOrStdout(), f.output)
		},
	}
	f.add(cmd, namespaced)
	if extra != nil {
		extra(cmd)
	}
	return cmd
}

// pluginName is the name kubectl finds plugins by: `kubectl corral jobs`
// runs kubectl-corral jobs.
const pluginName = "kubectl-corral"

// asPlugin reports whether the binary runs under its kubectl plugin name,
// so that help shows the commands as a kubectl user types them.
func asPlugin() bool {
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".exe") == pluginName
}
