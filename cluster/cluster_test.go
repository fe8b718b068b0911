package cluster

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestConfigCheck checks what a replica refuses to join with, naming the
// key at fault.
func TestConfigCheck(t *testing.T) {
	good := Config{AdvertiseURL: "http://docstream-0.docstream-headless:8080", Secret: "0123456789abcdef", Heartbeat: 2 * time.Second, OwnerTimeout: 15 * time.Second}
	if err := good.Check(); err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.AdvertiseURL = "" }, "cluster.advertise_url is empty"},
		{func(c *Config) { c.AdvertiseURL = "docstream-0:8080" }, "want http://host:port"},
		{func(c *Config) { c.Secret = "short" }, "cluster.secret"},
		{func(c *Config) { c.OwnerTimeout = 3 * time.Second }, "cluster.owner_timeout"},
		{func(c *Config) { c.Heartbeat = 0 }, "cluster.heartbeat"},
	} {
		cfg := good
		c.edit(&cfg)
		if err := cfg.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error naming %q", cfg, err, c.want)
		}
	}
}

// TestAuthentic checks that only the cluster's own secret marks a request
// as another replica's.
func TestAuthentic(t *testing.T) {
	c := &Cluster{cfg: Config{Secret: "0123456789abcdef"}}
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if c.Authentic(r) {
		t.Errorf("a request without the secret is authentic")
	}
	r.Header.Set(SecretHeader, "0123456789abcdeX")
	if c.Authentic(r) {
		t.Errorf("a request with another secret is authentic")
	}
	c.Sign(r.Header)
	if !c.Authentic(r) {
		t.Errorf("a signed request is not authentic")
	}
}
