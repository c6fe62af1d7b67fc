package deploy

// This file checks the deployment files as far as this machine can without
// a container runtime or a Kubernetes cluster:
//
//   - compose.yaml loads with the Compose specification's own loader, which
//     validates it against the specification's JSON schema;
//   - every Kubernetes document decodes strictly (no unknown or misspelt
//     field) into its typed API object;
//   - the systemd unit passes systemd-analyze verify;
//   - every sluiced flag any of them passes is one the binary knows, and the
//     three brokers have distinct node ids and zones.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// sluicedFlags builds sluiced and returns the flag names its --help lists.
func sluicedFlags(t *testing.T) map[string]bool {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluiced")
	build := exec.Command("go", "build", "-o", bin, "./cmd/sluiced")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build sluiced: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("sluiced --help: %v\n%s", err, out)
	}
	flags := map[string]bool{}
	re := regexp.MustCompile(`^\s+-([a-z0-9-]+)`)
	for _, line := range strings.Split(string(out), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			flags[m[1]] = true
		}
	}
	if len(flags) < 20 || !flags["node-id"] || !flags["object-store"] {
		t.Fatalf("sluiced --help listed only %d flags: %s", len(flags), out)
	}
	return flags
}

// checkArgs fails on any --flag in args that sluiced does not know, and
// returns the flags' values by name.
func checkArgs(t *testing.T, where string, args []string, known map[string]bool) map[string]string {
	t.Helper()
	vals := map[string]string{}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			t.Errorf("%s: argument %q is not a --flag=value", where, a)
			continue
		}
		name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			t.Errorf("%s: flag %q has no =value", where, a)
		}
		if !known[name] {
			t.Errorf("%s: sluiced has no flag --%s", where, name)
		}
		vals[name] = val
	}
	return vals
}

func TestComposeFile(t *testing.T) {
	known := sluicedFlags(t)
	ctx := context.Background()
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"},
		cli.WithWorkingDirectory("."), cli.WithName("sluice"), cli.WithConsistency(true))
	if err != nil {
		t.Fatal(err)
	}
	// LoadProject validates against the Compose schema and checks that
	// every depends_on, volume and network a service names exists.
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	nodes, azs, hostPorts := map[string]string{}, map[string]string{}, map[uint32]string{}
	brokers := 0
	for name, svc := range p.Services {
		for _, port := range svc.Ports {
			if port.Published == "" {
				continue
			}
			var hp uint32
			fmt.Sscan(port.Published, &hp)
			if other, dup := hostPorts[hp]; dup {
				t.Errorf("host port %d published by %s and %s", hp, other, name)
			}
			hostPorts[hp] = name
		}
		if !strings.HasPrefix(name, "broker") {
			continue
		}
		brokers++
		vals := checkArgs(t, "compose "+name, svc.Command, known)
		for _, f := range []string{"node-id", "az", "etcd-endpoints", "object-store", "advertised-listeners", "inter-broker-advertise"} {
			if vals[f] == "" {
				t.Errorf("compose %s: no --%s", name, f)
			}
		}
		if other, dup := nodes[vals["node-id"]]; dup {
			t.Errorf("node id %s given to %s and %s", vals["node-id"], other, name)
		}
		nodes[vals["node-id"]] = name
		if other, dup := azs[vals["az"]]; dup {
			t.Errorf("zone %s given to %s and %s", vals["az"], other, name)
		}
		azs[vals["az"]] = name
		// The advertised inter-broker address is this service's own name.
		if !strings.HasPrefix(vals["inter-broker-advertise"], name+":") {
			t.Errorf("compose %s advertises inter-broker %q, not its own name", name, vals["inter-broker-advertise"])
		}
		for _, dep := range []string{"etcd1", "etcd2", "etcd3", "s3"} {
			if _, ok := svc.DependsOn[dep]; !ok {
				t.Errorf("compose %s does not depend on %s", name, dep)
			}
		}
	}
	if brokers != 3 {
		t.Errorf("compose.yaml has %d brokers, want 3", brokers)
	}
}

// k8sDocs returns every YAML document of the files in k8s/ (but the
// kustomization) by file.
func k8sDocs(t *testing.T) map[string][][]byte {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no k8s manifests: %v", err)
	}
	docs := map[string][][]byte{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
			if strings.TrimSpace(stripComments(d)) != "" {
				docs[f] = append(docs[f], []byte(d))
			}
		}
	}
	return docs
}

func stripComments(s string) string {
	var out strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if !strings.HasPrefix(strings.TrimSpace(sc.Text()), "#") {
			out.WriteString(sc.Text() + "\n")
		}
	}
	return out.String()
}

func TestKubernetesManifests(t *testing.T) {
	known := sluicedFlags(t)
	var (
		sets     []appsv1.StatefulSet
		pdbs     []policyv1.PodDisruptionBudget
		services = map[string]corev1.Service{}
		config   *corev1.ConfigMap
		secret   *corev1.Secret
	)
	for file, docs := range k8sDocs(t) {
		for i, d := range docs {
			var head struct{ APIVersion, Kind string }
			if err := yaml.Unmarshal(d, &head); err != nil {
				t.Fatalf("%s doc %d: %v", file, i, err)
			}
			where := fmt.Sprintf("%s doc %d (%s)", file, i, head.Kind)
			// UnmarshalStrict refuses any field the API type lacks, so a
			// misspelt or misplaced key fails here rather than being
			// dropped silently by the API server.
			var err error
			switch head.Kind {
			case "Namespace":
				var o corev1.Namespace
				err = yaml.UnmarshalStrict(d, &o)
			case "ConfigMap":
				config = new(corev1.ConfigMap)
				err = yaml.UnmarshalStrict(d, config)
			case "Secret":
				secret = new(corev1.Secret)
				err = yaml.UnmarshalStrict(d, secret)
			case "Service":
				var o corev1.Service
				err = yaml.UnmarshalStrict(d, &o)
				services[o.Name] = o
			case "PodDisruptionBudget":
				var o policyv1.PodDisruptionBudget
				err = yaml.UnmarshalStrict(d, &o)
				pdbs = append(pdbs, o)
			case "StatefulSet":
				var o appsv1.StatefulSet
				err = yaml.UnmarshalStrict(d, &o)
				sets = append(sets, o)
			default:
				t.Errorf("%s: no check for kind %q", where, head.Kind)
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	}
	if config == nil || secret == nil {
		t.Fatal("k8s: no ConfigMap or Secret")
	}
	// The shared config file's keys are sluiced flags.
	var shared map[string]any
	if err := yaml.UnmarshalStrict([]byte(config.Data["sluiced.yaml"]), &shared); err != nil {
		t.Fatalf("ConfigMap sluiced.yaml: %v", err)
	}
	for k := range shared {
		if !known[k] {
			t.Errorf("ConfigMap sluiced.yaml: sluiced has no flag %q", k)
		}
	}
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
		if _, ok := secret.StringData[k]; !ok {
			t.Errorf("Secret %s has no %s", secret.Name, k)
		}
	}
	if len(sets) != 3 {
		t.Fatalf("k8s: %d StatefulSets, want one per zone (3)", len(sets))
	}
	nodes, zones := map[string]bool{}, map[string]bool{}
	for _, s := range sets {
		pod := s.Spec.Template
		if _, ok := services[s.Spec.ServiceName]; !ok || services[s.Spec.ServiceName].Spec.ClusterIP != "None" {
			t.Errorf("StatefulSet %s: serviceName %q is not a headless Service", s.Name, s.Spec.ServiceName)
		}
		for k, v := range s.Spec.Selector.MatchLabels {
			if pod.Labels[k] != v {
				t.Errorf("StatefulSet %s: selector %s=%s does not match its pods", s.Name, k, v)
			}
		}
		for _, pdb := range pdbs {
			for k, v := range pdb.Spec.Selector.MatchLabels {
				if pod.Labels[k] != v {
					t.Errorf("PodDisruptionBudget %s does not select StatefulSet %s's pods", pdb.Name, s.Name)
				}
			}
		}
		c := pod.Spec.Containers[0]
		vals := checkArgs(t, "StatefulSet "+s.Name, c.Args, known)
		if nodes[vals["node-id"]] || zones[vals["az"]] {
			t.Errorf("StatefulSet %s repeats node id %q or zone %q", s.Name, vals["node-id"], vals["az"])
		}
		nodes[vals["node-id"]], zones[vals["az"]] = true, true
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("StatefulSet %s: readiness is not GET /readyz", s.Name)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
			t.Errorf("StatefulSet %s: liveness is not GET /healthz", s.Name)
		}
		if len(c.EnvFrom) == 0 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != secret.Name {
			t.Errorf("StatefulSet %s: S3 credentials do not come from Secret %s", s.Name, secret.Name)
		}
		if a := pod.Spec.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			t.Errorf("StatefulSet %s is not pinned to a zone", s.Name)
		}
		if len(s.Spec.VolumeClaimTemplates) != 1 {
			t.Errorf("StatefulSet %s has no data volume claim", s.Name)
		}
	}
	if len(pdbs) != 1 || pdbs[0].Spec.MaxUnavailable == nil || pdbs[0].Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("want one PodDisruptionBudget with maxUnavailable 1, have %+v", pdbs)
	}

	// The kustomization names every manifest, once.
	var k struct {
		Resources []string `json:"resources"`
	}
	b, err := os.ReadFile("k8s/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	var want []string
	for f := range k8sDocs(t) {
		want = append(want, filepath.Base(f))
	}
	sort.Strings(want)
	sort.Strings(k.Resources)
	if strings.Join(want, ",") != strings.Join(k.Resources, ",") {
		t.Errorf("kustomization resources %v, files %v", k.Resources, want)
	}
}

func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("SLUICE_SKIP_SYSTEMD") == "1" {
			t.Skip("no systemd-analyze and SLUICE_SKIP_SYSTEMD=1")
		}
		t.Fatal("systemd-analyze not found (Debian package systemd); SLUICE_SKIP_SYSTEMD=1 skips this test")
	}
	unit, err := os.ReadFile("systemd/sluiced.service")
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart's binary exists: point it at a real one.
	bin := filepath.Join(t.TempDir(), "sluiced")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "sluiced.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/local/bin/sluiced"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	// verify prints a line per problem it finds in the unit, naming it.
	if err != nil || bytes.Contains(out, []byte("sluiced.service")) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, opt := range []string{"NoNewPrivileges=yes", "ProtectSystem=strict", "CapabilityBoundingSet=", "StateDirectory=sluice", "SystemCallFilter=@system-service"} {
		if !bytes.Contains(unit, []byte("\n"+opt+"\n")) {
			t.Errorf("unit lacks %s", opt)
		}
	}
}
