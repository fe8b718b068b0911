package deploy

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestComposeCluster checks deploy/compose.cluster.yaml and its nginx
// configuration: PostgreSQL, three replicas that each advertise their own
// name and share the store and the secret, and nginx balancing over exactly
// those replicas without affinity.
func TestComposeCluster(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			Image       string            `yaml:"image"`
		} `yaml:"services"`
	}
	data, err := os.ReadFile("compose.cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("compose.cluster.yaml: %v", err)
	}
	if !strings.HasPrefix(compose.Services["postgres"].Image, "postgres:") {
		t.Errorf("no PostgreSQL service")
	}
	var replicas, volumes []string
	for name, svc := range compose.Services {
		if !strings.HasPrefix(name, "docstream-") {
			continue
		}
		replicas = append(replicas, name)
		env := svc.Environment
		if env["DOCSTREAM_STORE_DRIVER"] != "postgres" || !strings.Contains(env["DOCSTREAM_STORE_DSN"], "@postgres:5432/") {
			t.Errorf("%s: store %q %q; want the postgres service", name, env["DOCSTREAM_STORE_DRIVER"], env["DOCSTREAM_STORE_DSN"])
		}
		if env["DOCSTREAM_CLUSTER_ADVERTISE_URL"] != "http://"+name+":8080" {
			t.Errorf("%s advertises %q", name, env["DOCSTREAM_CLUSTER_ADVERTISE_URL"])
		}
		if !strings.HasPrefix(env["DOCSTREAM_CLUSTER_SECRET"], "${DOCSTREAM_CLUSTER_SECRET:?") {
			t.Errorf("%s: the cluster secret must come from the environment, required", name)
		}
		volumes = append(volumes, svc.Volumes...)
	}
	slices.Sort(replicas)
	if !slices.Equal(replicas, []string{"docstream-1", "docstream-2", "docstream-3"}) {
		t.Fatalf("replicas %v; want three", replicas)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(volumes)))) != 6 {
		t.Errorf("the replicas share volumes: %v", volumes)
	}
	conf, err := os.ReadFile("nginx/docstream.conf")
	if err != nil {
		t.Fatal(err)
	}
	var upstream []string
	for _, m := range regexp.MustCompile(`(?m)^\s*server\s+([a-z0-9-]+):8080;`).FindAllStringSubmatch(string(conf), -1) {
		upstream = append(upstream, m[1])
	}
	if !slices.Equal(upstream, replicas) {
		t.Errorf("nginx balances over %v; want %v", upstream, replicas)
	}
	for _, sticky := range []string{"ip_hash", "hash ", "sticky"} {
		if strings.Contains(string(conf), sticky) {
			t.Errorf("nginx has affinity (%s): any replica answers any request", sticky)
		}
	}
	if !strings.Contains(string(conf), "proxy_buffering off") {
		t.Errorf("SSE needs proxy_buffering off")
	}
}
