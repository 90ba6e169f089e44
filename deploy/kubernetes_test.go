package deploy

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/knadh/koanf/parsers/yaml"
)

// obj is a parsed YAML mapping.
type obj = map[string]any

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(obj)
		v = m[k]
	}
	return v
}

func list(v any) []any { l, _ := v.([]any); return l }

func str(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// parseYAML reads every document of a YAML file.
func parseYAML(t *testing.T, file string) []obj {
	t.Helper()
	var docs []obj
	for _, doc := range strings.Split("\n"+read(t, file), "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		m, err := yaml.Parser().Unmarshal([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(m) > 0 {
			docs = append(docs, m)
		}
	}
	return docs
}

// kustomized is what a kustomization builds, as far as the pods' limits
// need: the workloads and the files behind each generated ConfigMap.
type kustomized struct {
	workloads  []obj
	configMaps map[string][]string // name -> files
}

// kustomize reads a kustomization directory: its resources (files, or
// directories with their own kustomization), its configMapGenerator and
// its strategic-merge patches, merging containers by name as kubectl does.
func kustomize(t *testing.T, dir string) kustomized {
	t.Helper()
	k := parseYAML(t, filepath.Join(dir, "kustomization.yaml"))[0]
	out := kustomized{configMaps: map[string][]string{}}
	for _, r := range list(k["resources"]) {
		p := filepath.Join(dir, str(r))
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			sub := kustomize(t, p)
			out.workloads = append(out.workloads, sub.workloads...)
			for name, files := range sub.configMaps {
				out.configMaps[name] = files
			}
			continue
		}
		for _, doc := range parseYAML(t, p) {
			if dig(doc, "spec", "template", "spec") != nil {
				out.workloads = append(out.workloads, doc)
			}
		}
	}
	for _, g := range list(k["configMapGenerator"]) {
		var files []string
		for _, f := range list(dig(g, "files")) {
			_, file, ok := strings.Cut(str(f), "=") // key=path or path
			if !ok {
				file = str(f)
			}
			files = append(files, filepath.Join(dir, file))
		}
		out.configMaps[str(dig(g, "name"))] = files // behavior: replace, or the only one
	}
	for _, p := range list(k["patches"]) {
		for _, patch := range parseYAML(t, filepath.Join(dir, str(dig(p, "path")))) {
			for _, w := range out.workloads {
				if str(dig(w, "kind")) == str(dig(patch, "kind")) && str(dig(w, "metadata", "name")) == str(dig(patch, "metadata", "name")) {
					mergePod(dig(w, "spec", "template", "spec").(obj), dig(patch, "spec", "template", "spec"))
				}
			}
		}
	}
	return out
}

// mergePod merges a patch's containers into a pod spec by name: a new
// name adds a container; a known one takes the patch's resources.
func mergePod(pod obj, patch any) {
	for _, kind := range []string{"initContainers", "containers"} {
		for _, pc := range list(dig(patch, kind)) {
			i := slices.IndexFunc(list(pod[kind]), func(c any) bool { return str(dig(c, "name")) == str(dig(pc, "name")) })
			if i < 0 {
				pod[kind] = append(list(pod[kind]), pc)
				continue
			}
			if r := dig(pc, "resources"); r != nil {
				list(pod[kind])[i].(obj)["resources"] = r
			}
		}
	}
}

// readsPodCgroup reports whether a container runs degraded with a config
// (from a generated ConfigMap) or an environment that reads a cgroup:
// signals.cpu, memory or pressure with source cgroup.
func readsPodCgroup(t *testing.T, pod obj, c any, configMaps map[string][]string) (bool, string) {
	t.Helper()
	var reads []string
	for _, e := range list(dig(c, "env")) {
		name := str(dig(e, "name"))
		if strings.HasPrefix(name, "DEGRADED_SIGNALS__") && strings.HasSuffix(name, "__SOURCE") && str(dig(e, "value")) == "cgroup" {
			reads = append(reads, name)
		}
	}
	args := list(dig(c, "args"))
	i := slices.IndexFunc(args, func(a any) bool { return str(a) == "--config" })
	if i >= 0 && i+1 < len(args) {
		file := str(args[i+1])
		for _, m := range list(dig(c, "volumeMounts")) {
			if mp := str(dig(m, "mountPath")); !strings.HasPrefix(file, strings.TrimSuffix(mp, "/")+"/") {
				continue
			}
			for _, v := range list(pod["volumes"]) {
				if str(dig(v, "name")) != str(dig(m, "name")) || dig(v, "configMap") == nil {
					continue
				}
				for _, f := range configMaps[str(dig(v, "configMap", "name"))] {
					if filepath.Base(f) != path.Base(file) {
						continue
					}
					cfg, err := yaml.Parser().Unmarshal([]byte(read(t, f)))
					if err != nil {
						t.Fatalf("%s: %v", f, err)
					}
					for _, sig := range []string{"cpu", "memory", "pressure"} {
						if str(dig(cfg, "signals", sig, "source")) == "cgroup" {
							reads = append(reads, filepath.ToSlash(f)+": signals."+sig+".source: cgroup")
						}
					}
				}
			}
		}
	}
	return len(reads) > 0, strings.Join(reads, ", ")
}

// TestKubernetesPodLimits: in every pod whose degraded reads the pod
// cgroup, every container (init containers and sidecars included) has a
// CPU and a memory limit. Kubernetes sets the pod cgroup's cpu.max and
// memory.max only when all of them do; one container without a limit
// leaves the pod unlimited ("max"), and the cgroup signals measure the
// whole node instead of the pod.
func TestKubernetesPodLimits(t *testing.T) {
	for _, dir := range []string{"kubernetes", filepath.Join("kubernetes", "fleet")} {
		t.Run(filepath.ToSlash(dir), func(t *testing.T) {
			k := kustomize(t, dir)
			if len(k.workloads) == 0 {
				t.Fatal("no workload with a pod template")
			}
			checked := 0
			for _, w := range k.workloads {
				pod := dig(w, "spec", "template", "spec").(obj)
				var all []any
				all = append(all, list(pod["initContainers"])...)
				all = append(all, list(pod["containers"])...)
				why := ""
				for _, c := range all {
					if ok, w := readsPodCgroup(t, pod, c, k.configMaps); ok {
						why = str(dig(c, "name")) + " (" + w + ")"
					}
				}
				if why == "" {
					continue
				}
				checked++
				for _, c := range all {
					for _, res := range []string{"cpu", "memory"} {
						if v := str(dig(c, "resources", "limits", res)); v == "" || strings.Trim(v, "0m") == "" {
							t.Errorf("%s %s: container %s has no %s limit, but %s reads the pod cgroup: the pod's %s.max stays \"max\" and the signal measures the node",
								dig(w, "kind"), dig(w, "metadata", "name"), dig(c, "name"), res, why, res)
						}
					}
				}
			}
			if checked == 0 {
				t.Errorf("no pod reads the pod cgroup: the sidecar example's signals should (source: cgroup)")
			}
		})
	}
}
