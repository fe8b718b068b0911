package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// TestPostgresAtStart checks that a postgres store that cannot be used
// stops the gateway before it listens, with exit code 2 and a message that
// says why: no DSN, no advertised URL or secret, or a database that does
// not answer.
func TestPostgresAtStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens there now
	base := map[string]string{
		"DOCSTREAM_SERVER_ADDR": "127.0.0.1:0", "DOCSTREAM_STORE_DRIVER": "postgres",
		"DOCSTREAM_STORE_DSN":             "postgres://docstream@" + closed + "/docstream?connect_timeout=2",
		"DOCSTREAM_CLUSTER_ADVERTISE_URL": "http://127.0.0.1:8080", "DOCSTREAM_CLUSTER_SECRET": "sixteen-characters-at-least",
	}
	for _, c := range []struct {
		unset, want string
	}{
		{"", "PostgreSQL cannot be used"},
		{"DOCSTREAM_STORE_DSN", "store.dsn"},
		{"DOCSTREAM_CLUSTER_ADVERTISE_URL", "cluster.advertise_url"},
		{"DOCSTREAM_CLUSTER_SECRET", "cluster.secret"},
	} {
		getenv := func(k string) string {
			if k == c.unset {
				return ""
			}
			return base[k]
		}
		var out, errOut bytes.Buffer
		err := run(context.Background(), nil, getenv, strings.NewReader(""), &out, &errOut)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("without %q: %v (exit %d); want exit 2 naming %q", c.unset, err, exitCode(err), c.want)
		}
		if strings.Contains(out.String(), "listening") {
			t.Errorf("without %q: it listened", c.unset)
		}
	}
}
