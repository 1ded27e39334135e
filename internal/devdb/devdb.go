// Package devdb runs a private PostgreSQL cluster for development and tests, made
// from the machine's PostgreSQL server binaries and kept under the data directory.
//
// The cluster trusts every connection from 127.0.0.1 and listens nowhere else. It is
// meant for one developer's machine or a CI box, never for real data.
package devdb

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/lib/pq" // the "postgres" database/sql driver
)

const (
	clusterName = "postgres"      // the cluster lives in <dataDir>/postgres
	lockName    = "postgres.lock" // <dataDir>/postgres.lock serialises Ensure and Stop
	portFile    = "port.conf"     // holds the port; included from postgresql.conf
	database    = "payreq"

	// Ports are derived from the cluster's path so that the clusters of two
	// checkouts on one machine do not collide. They stay below Linux's
	// ephemeral ports (32768-60999): a cluster stopped and started again
	// could otherwise find its port held by an outgoing connection.
	firstPort = 20000
	portRange = 12000
)

// settings are appended to the postgresql.conf that initdb writes.
const settings = `
# Added by payreq's internal/devdb: a private cluster for development and tests.
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 200
shared_buffers = 128MB
include '` + portFile + `'
`

// binGlob finds server binaries when pg_config does not; a variable so a test can
// simulate a machine without them.
var binGlob = "/usr/lib/postgresql/*/bin"

// Ensure starts the private cluster under <dataDir>/postgres, creating it first if
// needed, makes sure the payreq database exists and returns its URL. A running
// cluster is reused. Several processes may call Ensure at once.
func Ensure(ctx context.Context, dataDir string) (dsn string, err error) {
	c, unlock, err := openCluster(dataDir)
	if err != nil {
		return "", err
	}
	defer unlock()

	if err := c.initialize(ctx); err != nil {
		return "", err
	}
	port, err := c.start(ctx)
	if err != nil {
		return "", err
	}
	if err := createDatabase(ctx, port); err != nil {
		return "", err
	}
	return url(port, database), nil
}

// Stop shuts the private cluster under <dataDir>/postgres down, if it runs.
func Stop(dataDir string) error {
	// Without a cluster there is nothing to stop, and nothing should be created.
	if _, err := os.Stat(filepath.Join(dataDir, clusterName, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	c, unlock, err := openCluster(dataDir)
	if err != nil {
		return err
	}
	defer unlock()

	ctx := context.Background()
	running, err := c.running(ctx)
	if err != nil {
		return err
	}
	if !running {
		return nil
	}
	if out, err := c.pgctl(ctx, "stop", "-D", c.dir, "-m", "fast", "-w").CombinedOutput(); err != nil {
		return fmt.Errorf("devdb: stop server: %w: %s", err, lastLine(out))
	}
	return nil
}

type cluster struct {
	dir string // absolute path of the data directory of the cluster
	bin string // directory of initdb, pg_ctl and postgres
}

// openCluster finds the server binaries and takes the data directory's lock; the
// returned function releases it.
func openCluster(dataDir string) (*cluster, func(), error) {
	bin, err := findBinDir()
	if err != nil {
		return nil, nil, err
	}
	dataDir, err = filepath.Abs(dataDir)
	if err != nil {
		return nil, nil, fmt.Errorf("devdb: resolve data directory: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("devdb: create data directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dataDir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("devdb: open lock file: %w", err)
	}
	// The lock is released when the file is closed, also when the process dies.
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("devdb: lock %s: %w", lock.Name(), err)
	}
	c := &cluster{dir: filepath.Join(dataDir, clusterName), bin: bin}
	return c, func() { lock.Close() }, nil
}

// findBinDir returns the directory holding initdb, pg_ctl and postgres: the one
// pg_config names, else the newest under /usr/lib/postgresql.
func findBinDir() (string, error) {
	var candidates []string
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	}
	globbed, _ := filepath.Glob(binGlob) // the pattern is well-formed
	sort.Slice(globbed, func(i, j int) bool { return version(globbed[i]) > version(globbed[j]) })
	candidates = append(candidates, globbed...)

	for _, dir := range candidates {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", errors.New("PostgreSQL server binaries not found: install them with `apt-get install postgresql`")
}

// version reads the major version from a path like /usr/lib/postgresql/15/bin.
func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// initialize creates the cluster if it does not exist yet. initdb runs in a scratch
// directory that is renamed into place, so an interrupted run leaves no half-made
// cluster behind.
func (c *cluster) initialize(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.dir, "PG_VERSION")); err == nil {
		return nil
	}
	scratch := c.dir + ".init"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("devdb: remove leftover %s: %w", scratch, err)
	}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return fmt.Errorf("devdb: create cluster directory: %w", err)
	}
	if err := chownToOwner(scratch); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		if err := c.asOwner(ctx, "test", "-w", scratch).Run(); err != nil {
			return fmt.Errorf("devdb: the postgres user cannot reach %s: every directory above it needs o+x, or choose another data directory", scratch)
		}
	}
	initdb := c.asOwner(ctx, filepath.Join(c.bin, "initdb"), "-D", scratch,
		"--username=postgres", "--auth=trust", "--encoding=UTF8", "--no-locale")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("devdb: initdb: %w: %s", err, lastLine(out))
	}

	conf, err := os.OpenFile(filepath.Join(scratch, "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("devdb: open postgresql.conf: %w", err)
	}
	if _, err := conf.WriteString(settings); err != nil {
		conf.Close()
		return fmt.Errorf("devdb: write postgresql.conf: %w", err)
	}
	if err := conf.Close(); err != nil {
		return fmt.Errorf("devdb: write postgresql.conf: %w", err)
	}
	port, err := pickPort(c.dir)
	if err != nil {
		return err
	}
	if err := writePort(scratch, port); err != nil {
		return err
	}
	if err := os.Rename(scratch, c.dir); err != nil {
		return fmt.Errorf("devdb: move new cluster into place: %w", err)
	}
	return nil
}

// start starts the server unless it runs, and returns its port.
func (c *cluster) start(ctx context.Context) (int, error) {
	port, err := readPort(c.dir)
	if err != nil {
		return 0, err
	}
	running, err := c.running(ctx)
	if err != nil {
		return 0, err
	}
	if running {
		// pg_ctl only checks that the pid in postmaster.pid is alive; after a machine
		// restart that pid may belong to another process of the postgres user.
		if !answers(port) {
			return 0, fmt.Errorf("devdb: pg_ctl reports a server for %s, but nothing answers on 127.0.0.1:%d; if no postgres process serves that directory, remove its postmaster.pid", c.dir, port)
		}
		return port, nil
	}
	// Something else may have taken the port since the cluster last ran.
	if !portFree(port) {
		if port, err = pickPort(c.dir); err != nil {
			return 0, err
		}
		if err := writePort(c.dir, port); err != nil {
			return 0, err
		}
	}

	logPath := filepath.Join(c.dir, "server.log")
	var logStart int64
	if info, err := os.Stat(logPath); err == nil {
		logStart = info.Size()
	}
	// pg_ctl starts the server even when a postmaster.pid was left behind by a
	// crash or a machine restart: the server checks whether that pid still runs.
	pgctl := c.pgctl(ctx, "start", "-D", c.dir, "-l", logPath, "-w")
	if out, err := pgctl.CombinedOutput(); err != nil {
		reason := fatalLine(logPath, logStart)
		if reason == "" {
			reason = lastLine(out)
		}
		return 0, fmt.Errorf("devdb: start server: %s (see %s)", reason, logPath)
	}
	return port, nil
}

// running reports whether the cluster's server runs.
func (c *cluster) running(ctx context.Context) (bool, error) {
	out, err := c.pgctl(ctx, "status", "-D", c.dir).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 3: // documented: not running
		return false, nil
	default:
		return false, fmt.Errorf("devdb: pg_ctl status: %w: %s", err, lastLine(out))
	}
}

func (c *cluster) pgctl(ctx context.Context, args ...string) *exec.Cmd {
	return c.asOwner(ctx, filepath.Join(c.bin, "pg_ctl"), args...)
}

// asOwner prepares program to run as the cluster's owner: initdb and pg_ctl refuse
// to run as root, so root hands them to the postgres user.
func (c *cluster) asOwner(ctx context.Context, program string, args ...string) *exec.Cmd {
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", program}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, program, args...)
	}
	// The owner may not be allowed into the caller's working directory.
	cmd.Dir = filepath.Dir(c.dir)
	return cmd
}

// chownToOwner hands path to the postgres user when running as root.
func chownToOwner(path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	owner, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("devdb: look up the postgres user (it comes with `apt-get install postgresql`): %w", err)
	}
	uid, err := strconv.Atoi(owner.Uid)
	if err != nil {
		return fmt.Errorf("devdb: postgres user id %q: %w", owner.Uid, err)
	}
	gid, err := strconv.Atoi(owner.Gid)
	if err != nil {
		return fmt.Errorf("devdb: postgres group id %q: %w", owner.Gid, err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		return fmt.Errorf("devdb: hand %s to the postgres user: %w", path, err)
	}
	return nil
}

// pickPort returns a free loopback port, starting from one derived from the
// cluster's absolute path.
func pickPort(clusterDir string) (int, error) {
	h := fnv.New32a()
	h.Write([]byte(clusterDir))
	start := int(h.Sum32() % portRange)
	for i := range 100 {
		port := firstPort + (start+i)%portRange
		if portFree(port) {
			return port, nil
		}
	}
	return 0, fmt.Errorf("devdb: no free port near %d on 127.0.0.1", firstPort+start)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func answers(port int) bool {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

func writePort(clusterDir string, port int) error {
	path := filepath.Join(clusterDir, portFile)
	if err := os.WriteFile(path, fmt.Appendf(nil, "port = %d\n", port), 0o644); err != nil {
		return fmt.Errorf("devdb: write %s: %w", path, err)
	}
	return chownToOwner(path)
}

func readPort(clusterDir string) (int, error) {
	path := filepath.Join(clusterDir, portFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("devdb: read port: %w", err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(b), "port = ")))
	if err != nil {
		return 0, fmt.Errorf("devdb: read port from %s: %w", path, err)
	}
	return port, nil
}

// createDatabase creates the payreq database unless it exists. Callers hold the
// lock, so no two of them race to create it.
func createDatabase(ctx context.Context, port int) error {
	db, err := sql.Open("postgres", url(port, "postgres"))
	if err != nil {
		return fmt.Errorf("devdb: connect to server: %w", err)
	}
	defer db.Close()

	var exists bool
	err = db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, database).Scan(&exists)
	if err != nil {
		return fmt.Errorf("devdb: look up database %s on port %d: %w", database, port, err)
	}
	if exists {
		return nil
	}
	if _, err := db.ExecContext(ctx, `CREATE DATABASE `+database); err != nil {
		return fmt.Errorf("devdb: create database %s: %w", database, err)
	}
	return nil
}

func url(port int, dbname string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, dbname)
}

// fatalLine returns the last FATAL line the server logged after offset, if any.
func fatalLine(logPath string, offset int64) string {
	f, err := os.Open(logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	var fatal string
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "FATAL:") {
			fatal = strings.TrimSpace(lines.Text())
		}
	}
	return fatal
}

// lastLine returns a program's last line of output, which carries its error.
func lastLine(out []byte) string {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	return string(lines[len(lines)-1])
}
