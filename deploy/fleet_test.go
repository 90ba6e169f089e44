package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/degraded/degraded/config"
	"github.com/google/go-cmp/cmp"
)

// TestKubernetesFleetExample: the fleet overlay's config validates with
// the environment the sidecar gives it, differs from the base sidecar's
// only by the fleet block, and the patch mounts what it names.
func TestKubernetesFleetExample(t *testing.T) {
	path := filepath.Join("kubernetes", "fleet", "degraded.yaml")
	text := read(t, path)
	// Validation reads the password and CA files: point them at temporary ones.
	dir := t.TempDir()
	files := map[string]string{}
	for _, key := range []string{"password_file", "ca_file"} {
		m := regexp.MustCompile(key + `:\s*([^\s,}]+)`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("%s sets no %s", path, key)
		}
		files[key] = m[1]
		tmp := filepath.Join(dir, key)
		if err := os.WriteFile(tmp, []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		text = strings.Replace(text, m[1], tmp, 1)
	}
	tmp := filepath.Join(dir, "degraded.yaml")
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"DEGRADED_AUTH__REPORT_TOKEN=test-report-token", "DEGRADED_FLEET__INSTANCE=shop-7c9f-x2"}
	fleet, err := loadExample(t, tmp, env)
	if err != nil {
		t.Fatalf("%s does not validate: %v", path, err)
	}
	if f := fleet.Fleet; !f.Enabled || f.Name != "shop" || f.Instance != "shop-7c9f-x2" || f.ErrorRateScope != "fleet" || len(f.Etcd.Endpoints) != 3 {
		t.Errorf("fleet block %+v, want shop in fleet scope over 3 endpoints, the instance from the pod name", f)
	}
	base, err := loadExample(t, filepath.Join("kubernetes", "degraded.yaml"), env)
	if err != nil {
		t.Fatal(err)
	}
	fleet.Fleet, base.Fleet = config.Fleet{}, config.Fleet{}
	fleet.Auth.TokenFile, base.Auth.TokenFile = "", ""
	if diff := cmp.Diff(base, fleet); diff != "" {
		t.Errorf("the fleet config differs from ../degraded.yaml beyond the fleet block (-base +fleet):\n%s", diff)
	}

	patch := read(t, filepath.Join("kubernetes", "fleet", "fleet-patch.yaml"))
	for what, want := range map[string]string{
		"the instance from the pod's name": "name: DEGRADED_FLEET__INSTANCE\n              valueFrom: {fieldRef: {fieldPath: metadata.name}}",
		"the password file's directory":    "mountPath: " + filepath.Dir(files["password_file"]) + ",",
		"the CA's directory":               "mountPath: " + filepath.Dir(files["ca_file"]) + ",",
		"the etcd Secret":                  "secretName: degraded-etcd",
	} {
		if !strings.Contains(patch, want) {
			t.Errorf("fleet-patch.yaml lacks %s: %q", what, want)
		}
	}
	kust := read(t, filepath.Join("kubernetes", "fleet", "kustomization.yaml"))
	for _, want := range []string{"- ../", "behavior: replace", "- degraded.yaml", "- path: fleet-patch.yaml"} {
		if !strings.Contains(kust, want) {
			t.Errorf("fleet/kustomization.yaml lacks %q", want)
		}
	}
}
