// Package pgtest starts throwaway PostgreSQL servers for tests: initdb
// once into a template, then a copy of it per server, on a free loopback
// port with its socket in its own folder. As root the server runs as
// nobody (PostgreSQL refuses root).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequiredEnv, when set, makes a missing PostgreSQL a test failure rather
// than a skip: the test command sets it after installing PostgreSQL.
const RequiredEnv = "DOCSTREAM_TEST_PG"

// Server is a running PostgreSQL of a test.
type Server struct {
	dir, bin string
	port     int
	cmd      *exec.Cmd
	exited   chan struct{}
	log      *os.File
}

// nobody is the user the server runs as when the tests run as root.
const nobody = 65534

// binDir finds the newest PostgreSQL's binaries.
func binDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

var (
	templateOnce sync.Once
	templateDir  string
	templateErr  error
)

// template runs initdb once into a folder kept for later test processes
// (one per PostgreSQL version), and returns its data directory.
func template(bin string) (string, error) {
	templateOnce.Do(func() {
		final := filepath.Join(os.TempDir(), "docstream-pgtemplate-"+filepath.Base(filepath.Dir(bin)))
		templateDir = filepath.Join(final, "data")
		if _, err := os.Stat(filepath.Join(templateDir, "PG_VERSION")); err == nil {
			return
		}
		dir, err := os.MkdirTemp("", "docstream-pginit-")
		if err == nil {
			err = own(dir)
		}
		if err != nil {
			templateErr = err
			return
		}
		cmd := asUser(exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres",
			"--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"))
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			templateErr = fmt.Errorf("initdb: %w\n%s", err, out)
			return
		}
		// Another process may have made it meanwhile: then its stays.
		if err := os.Rename(dir, final); err != nil {
			os.RemoveAll(dir)
		}
	})
	return templateDir, templateErr
}

// own gives dir to the server's user when the tests run as root.
func own(dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	return os.Chown(dir, nobody, nobody)
}

// asUser runs cmd as the server's user when the tests run as root. A
// server outlives no test process: it gets SIGQUIT (its immediate
// shutdown) when the process ends.
func asUser(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	return cmd
}

// Start starts a PostgreSQL server for t, stopped when t ends. Without
// PostgreSQL's binaries t is skipped, or fails when RequiredEnv is set.
func Start(t testing.TB) *Server {
	t.Helper()
	if binDir() == "" {
		if os.Getenv(RequiredEnv) != "" {
			t.Fatalf("%s is set but PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb): run bash store/pgtest/install.sh", RequiredEnv)
		}
		t.Skip("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb) and " + RequiredEnv + " is unset: skipped; `make unit` installs it")
	}
	s, err := Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Remove)
	return s
}

// ErrNotInstalled is Launch's error where PostgreSQL is not installed.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb)")

// Launch starts a PostgreSQL server in a new folder; Remove stops it and
// deletes the folder.
func Launch() (*Server, error) {
	bin := binDir()
	if bin == "" {
		return nil, ErrNotInstalled
	}
	tmpl, err := template(bin)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "docstream-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	if err := s.prepare(tmpl); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.start(); err != nil {
		s.Remove()
		return nil, err
	}
	return s, nil
}

// prepare copies the template into the server's folder and picks its port.
func (s *Server) prepare(tmpl string) error {
	if err := own(s.dir); err != nil {
		return err
	}
	if out, err := asUser(exec.Command("cp", "-a", tmpl, filepath.Join(s.dir, "data"))).CombinedOutput(); err != nil {
		return fmt.Errorf("copying the template: %w\n%s", err, out)
	}
	sock := filepath.Join(s.dir, "sock")
	if err := os.Mkdir(sock, 0o755); err != nil {
		return err
	}
	if err := own(sock); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	return l.Close()
}

// Remove stops the server and deletes its folder.
func (s *Server) Remove() {
	s.Stop()
	os.RemoveAll(s.dir)
}

// DSN is the address of the server's postgres database.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Restart starts the server again once stopped, and waits until it takes
// connections.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// start starts the server and waits until it takes connections.
func (s *Server) start() error {
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	s.log = log
	s.cmd = asUser(exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.port), "-k", filepath.Join(s.dir, "sock"), "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200"))
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		return err
	}
	s.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(s.cmd, s.exited)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.DSN())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case <-s.exited:
			b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			return fmt.Errorf("postgres exited at start:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres does not take connections: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server at once (its clients are disconnected) and waits
// for it.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	s.cmd = nil
	s.log.Close()
}
