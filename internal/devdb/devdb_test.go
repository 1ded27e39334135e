package devdb

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// helperDataDir tells the test binary, started again by TestEnsureConcurrent, to
// act as one more process calling Ensure.
const helperDataDir = "DEVDB_TEST_HELPER_DATA_DIR"

func TestEnsureConcurrent(t *testing.T) {
	dataDir := newDataDir(t)
	ctx := context.Background()

	const goroutines, processes = 2, 2
	dsns := make([]string, goroutines+processes)
	errs := make([]error, goroutines+processes)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() { dsns[i], errs[i] = Ensure(ctx, dataDir) })
	}
	for i := goroutines; i < goroutines+processes; i++ {
		wg.Go(func() { dsns[i], errs[i] = ensureInProcess(dataDir) })
	}
	wg.Wait()

	for i := range dsns {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		if dsns[i] != dsns[0] {
			t.Errorf("caller %d got %q, caller 0 got %q", i, dsns[i], dsns[0])
		}
	}
	if !strings.HasPrefix(dsns[0], "postgres://postgres@127.0.0.1:") || !strings.HasSuffix(dsns[0], "/payreq?sslmode=disable") {
		t.Errorf("dsn = %q", dsns[0])
	}
	checkConnects(t, dsns[0])
}

// TestEnsureHelperProcess is not a test: TestEnsureConcurrent runs it in a
// separate process.
func TestEnsureHelperProcess(t *testing.T) {
	dataDir := os.Getenv(helperDataDir)
	if dataDir == "" {
		t.Skip("helper process for TestEnsureConcurrent")
	}
	dsn, err := Ensure(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("DSN=" + dsn + "\n")
}

func ensureInProcess(dataDir string) (string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestEnsureHelperProcess$")
	cmd.Env = append(os.Environ(), helperDataDir+"="+dataDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", &helperError{err: err, out: out}
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if dsn, ok := strings.CutPrefix(line, "DSN="); ok {
			return dsn, nil
		}
	}
	return "", &helperError{out: out}
}

type helperError struct {
	err error
	out []byte
}

func (e *helperError) Error() string {
	return "helper process: " + strconv.Quote(string(e.out)) + ": " + errString(e.err)
}

func errString(err error) string {
	if err == nil {
		return "no DSN printed"
	}
	return err.Error()
}

// A postmaster.pid left behind by a crash or a machine restart must not stop the
// next start, whether its pid is gone or now belongs to another process.
func TestEnsureStartsOverStalePIDFile(t *testing.T) {
	dataDir := newDataDir(t)
	ctx := context.Background()
	dsn, err := Ensure(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	pidPath := filepath.Join(dataDir, clusterName, "postmaster.pid")
	left, err := os.ReadFile(pidPath)
	if err != nil {
		t.Fatal(err)
	}
	// The stopped server's own pid may linger as a zombie for a moment; the pid of
	// a process that has been waited for is gone for good.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		pid  int
	}{
		{"pid gone", gone.Process.Pid},
		{"pid reused by init", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Stop(dataDir); err != nil {
				t.Fatal(err)
			}
			_, rest, _ := bytes.Cut(left, []byte("\n"))
			stale := append([]byte(strconv.Itoa(tc.pid)+"\n"), rest...)
			if err := os.WriteFile(pidPath, stale, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := chownToOwner(pidPath); err != nil {
				t.Fatal(err)
			}

			again, err := Ensure(ctx, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			if again != dsn {
				t.Errorf("dsn changed from %q to %q", dsn, again)
			}
			checkConnects(t, again)
		})
	}
}

func TestEnsureWithoutBinaries(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no pg_config
	saved := binGlob
	binGlob = filepath.Join(t.TempDir(), "*", "bin")
	t.Cleanup(func() { binGlob = saved })

	_, err := Ensure(context.Background(), t.TempDir())
	want := "PostgreSQL server binaries not found: install them with `apt-get install postgresql`"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
}

func TestEnsureUnreachableDataDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands the cluster to the postgres user")
	}
	private := t.TempDir() // mode 0700: the postgres user cannot enter it
	_, err := Ensure(context.Background(), filepath.Join(private, "data"))
	if err == nil || !strings.Contains(err.Error(), "the postgres user cannot reach") {
		t.Fatalf("err = %v, want one saying the postgres user cannot reach the directory", err)
	}
}

func TestStopWithoutCluster(t *testing.T) {
	dataDir := t.TempDir()
	if err := Stop(dataDir); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
		t.Errorf("Stop created %v", entries)
	}
}

// When another program took the cluster's port while it was stopped, the cluster
// moves to a free one.
func TestEnsureMovesOffTakenPort(t *testing.T) {
	dataDir := newDataDir(t)
	ctx := context.Background()
	dsn, err := Ensure(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if err := Stop(dataDir); err != nil {
		t.Fatal(err)
	}
	port, err := readPort(filepath.Join(dataDir, clusterName))
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	moved, err := Ensure(ctx, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if moved == dsn {
		t.Errorf("dsn %q still uses the taken port", moved)
	}
	checkConnects(t, moved)
}

func TestPickPortSkipsBusyPort(t *testing.T) {
	dir := "/some/checkout/.data/postgres"
	first, err := pickPort(dir)
	if err != nil {
		t.Fatal(err)
	}
	if first < firstPort || first >= firstPort+portRange {
		t.Fatalf("port %d outside [%d, %d)", first, firstPort, firstPort+portRange)
	}
	busy, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(first)))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	next, err := pickPort(dir)
	if err != nil {
		t.Fatal(err)
	}
	if next == first {
		t.Errorf("pickPort returned busy port %d", first)
	}
}

// newDataDir returns a data directory the postgres user can reach, and stops its
// cluster when the test ends.
func newDataDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "devdb-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Stop(dir); err != nil {
			t.Error(err)
		}
		os.RemoveAll(dir)
	})
	return dir
}

func checkConnects(t *testing.T, dsn string) {
	t.Helper()
	db, err := sql.Open("postgres", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var name string
	if err := db.QueryRow(`SELECT current_database()`).Scan(&name); err != nil {
		t.Fatalf("query %s: %v", dsn, err)
	}
	if name != "payreq" {
		t.Errorf("current_database() = %q, want payreq", name)
	}
}
