package main

import (
	"strings"
	"testing"
)

// FuzzEnvOverride sets every configuration key from the environment to the
// same fuzzed value: LoadConfig may refuse it, never panic, and a value it
// accepts leaves a configuration that validates.
func FuzzEnvOverride(f *testing.F) {
	for _, v := range []string{"1s", "10", "true", "a,b", "main=/tmp,x=/y", "=", ",", "-1", "1e309", "NaN", "0x10"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		cfg, err := LoadConfig("", func(name string) string {
			if strings.HasPrefix(name, "DOCSTREAM_") {
				return v
			}
			return ""
		})
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("LoadConfig accepted %q but the result does not validate: %v", v, err)
		}
	})
}

// TestMalformedHashedKeyRefused: a "sha256:" key that is not a digest must
// stop the start, not leave the gateway without auth.
func TestMalformedHashedKeyRefused(t *testing.T) {
	for _, keys := range []string{"sha256:nothex", "sha256:abcd", "good,sha256:" + strings.Repeat("z", 64)} {
		_, err := LoadConfig("", func(name string) string {
			if name == "DOCSTREAM_AUTH_API_KEYS" {
				return keys
			}
			return ""
		})
		if err == nil {
			t.Errorf("DOCSTREAM_AUTH_API_KEYS=%s was accepted", keys)
		} else if strings.Contains(err.Error(), "nothex") || strings.Contains(err.Error(), "zzzz") {
			t.Errorf("the error echoes the key: %v", err)
		}
	}
	good := "sha256:" + strings.Repeat("ab", 32)
	if _, err := LoadConfig("", func(name string) string {
		if name == "DOCSTREAM_AUTH_API_KEYS" {
			return good + ",plain-key"
		}
		return ""
	}); err != nil {
		t.Errorf("a valid digest was refused: %v", err)
	}
}
