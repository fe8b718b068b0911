package gateway

import (
	"slices"
	"strings"
	"time"
)

// ServerConfig configures the HTTP server.
type ServerConfig struct {
	Addr              string        `yaml:"addr"`
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadBodyTimeout   time.Duration `yaml:"read_body_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	ShutdownTimeout   time.Duration `yaml:"shutdown_timeout"`
	Heartbeat         time.Duration `yaml:"heartbeat"`
	MaxBodyBytes      int64         `yaml:"max_body_bytes"`
	MaxPromptBytes    int           `yaml:"max_prompt_bytes"`
	TrustedProxies    []string      `yaml:"trusted_proxies"`
	CORSOrigins       []string      `yaml:"cors_origins"`
	MaxConnections    int           `yaml:"max_connections"`
}

// AuthConfig configures client authentication and per-key limits.
type AuthConfig struct {
	APIKeys       []string `yaml:"api_keys"`
	RatePerMinute float64  `yaml:"rate_per_minute"`
	Burst         int      `yaml:"burst"`
	// IsolateKeys makes each key a tenant that sees only what it made (with API keys).
	IsolateKeys bool `yaml:"isolate_keys"`
}

// HasKeys reports whether any API key is configured (blank ones are none).
func (a AuthConfig) HasKeys() bool {
	return slices.ContainsFunc(a.APIKeys, func(k string) bool { return strings.TrimSpace(k) != "" })
}
