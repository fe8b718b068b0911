package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"runtime"
	"time"

	"github.com/docstream/docstream/store/pgtest"
)

// runClusterCase measures a case's streams spread round robin over
// c.Replicas replicas on one PostgreSQL (the docstream side) beside the
// same streams on one replica with its SQLite store (the other side), with
// the same agent, rounds alternating.
func runClusterCase(ctx context.Context, env *e2eEnv, c e2eCase) e2eOutcome {
	out := e2eOutcome{Case: c}
	a := env.agent(c.Agent)
	pg, err := pgtest.Launch()
	if err != nil {
		out.Err = fmt.Errorf("postgres: %w", err)
		return out
	}
	defer pg.Remove()
	one := c
	one.SQLite = true
	single, err := startGateway(env.bin, env.dir, a, one)
	if err != nil {
		out.Err = fmt.Errorf("one replica: %w", err)
		return out
	}
	defer single.Stop()
	var urls []string
	for i := range c.Replicas {
		r, err := startReplica(env.bin, env.dir, a, c, pg.DSN())
		if err != nil {
			out.Err = fmt.Errorf("replica %d: %w", i+1, err)
			return out
		}
		defer r.Stop()
		urls = append(urls, r.URL)
	}
	warm := loadSpec{Streams: len(urls), Prompt: "bench:5", Events: 5, Timeout: 30 * time.Second, URLs: urls}
	if w := runLoad(ctx, urls[0], 0, warm); !w.Complete {
		out.Err = fmt.Errorf("replicas: warm-up failed: %v", w.Errors)
		return out
	}
	if w := runLoad(ctx, single.URL, 0, warm); !w.Complete {
		out.Err = fmt.Errorf("one replica: warm-up failed: %v", w.Errors)
		return out
	}
	for round := range max(c.Rounds, 1) {
		for i := range 2 {
			if ctx.Err() != nil {
				out.Err = ctx.Err()
				return out
			}
			runtime.GC()
			spec := c.Spec
			if (round+i)%2 == 0 {
				spec.URLs = urls
				out.GW = append(out.GW, runLoad(ctx, urls[0], 0, spec))
			} else {
				out.Relay = append(out.Relay, runLoad(ctx, single.URL, single.Pid(), spec))
			}
		}
	}
	return out
}

// startReplica starts the docstream binary as a replica on the PostgreSQL
// of dsn, on a free loopback port it advertises.
func startReplica(bin, dir string, a agentSetup, c e2eCase, dsn string) (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "--addr", addr)
	cmd.Env = append(gatewayEnv(a, c, ""), "DOCSTREAM_STORE_DRIVER=postgres", "DOCSTREAM_STORE_DSN="+dsn,
		"DOCSTREAM_CLUSTER_ADVERTISE_URL=http://"+addr, "DOCSTREAM_CLUSTER_SECRET=docstream-bench-cluster-secret")
	cmd.Dir = dir
	return startServer("replica", cmd, dir, "docstream listening on ")
}
