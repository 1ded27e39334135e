package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a server the harness started: payreq serve or the bare Echo.
type process struct {
	name  string
	cmd   *exec.Cmd
	url   string // http://127.0.0.1:port
	debug string // payreq's pprof address, when it has one
	done  chan error
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs bin with args and env (added to the harness's environment),
// its output to logPath, and waits until GET readyPath answers 200.
func start(name, bin string, args, env []string, addr, debug, logPath, readyPath string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, url: "http://" + addr, debug: debug, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		logFile.Close()
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(p.url + readyPath)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("%s exited while starting (%v); see %s", name, err, logPath)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s did not answer %s in 2 minutes; see %s", name, readyPath, logPath)
		}
	}
}

// stop asks the server to finish (SIGTERM) and waits for it.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// peakRSS is the process's peak resident set (VmHWM) in bytes.
func (p *process) peakRSS() int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuTime is the CPU time (user and system) the process has used.
func (p *process) cpuTime() time.Duration { return cpuTime(p.cmd.Process.Pid) }

// cpuTime is the CPU time (user and system) process pid has used.
func cpuTime(pid int) time.Duration {
	f := statFields(pid)
	if len(f) < 13 {
		return 0
	}
	return ticks(f[11], f[12])
}

// statFields are the fields of /proc/pid/stat after the command name (in
// parentheses, which may hold spaces): the state is the first, the parent
// pid the second, utime, stime, cutime and cstime the 12th to 15th.
func statFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// ticks sums clock ticks (100 a second).
func ticks(fields ...string) time.Duration {
	var n int64
	for _, f := range fields {
		v, _ := strconv.ParseInt(f, 10, 64)
		n += v
	}
	return time.Duration(n) * 10 * time.Millisecond
}

// databaseCPU is the CPU time the bench cluster has used: its postmaster,
// the children it has reaped (cutime, cstime: backends of connections that
// closed) and the children alive now. A backend that exits between two
// readings moves from the last sum to the first, so a difference counts it.
// Of it, sessions is what the sessions of clients (backends serving a
// connection, over loopback) have used: not the background processes
// (checkpointer, WAL writer, autovacuum), whose work a run may leave to the
// next.
func databaseCPU(dataDir string) (total, sessions time.Duration) {
	pid, err := postmaster(dataDir)
	if err != nil {
		return 0, 0
	}
	f := statFields(pid)
	if len(f) < 15 {
		return 0, 0
	}
	total = ticks(f[11], f[12], f[13], f[14])
	for _, child := range children(pid) {
		t := cpuTime(child)
		total += t
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", child)); err == nil && strings.Contains(string(cmd), " 127.0.0.1(") {
			sessions += t
		}
	}
	return total, sessions
}

// measure runs load against p, with its peak RSS, and over the measured
// window the CPU time of the server, the database and this load program,
// and the statements PostgreSQL ran in ds's database (none when ds is nil).
func (h *harness) measure(ctx context.Context, p *process, ds *dataset, load func() result) (result, int64, error) {
	dsn := ""
	if ds != nil {
		dsn = ds.dsn
	}
	p.resetPeakRSS()
	wait := h.overWindow(ctx, dsn, func() counters {
		db, sessions := databaseCPU(h.o.dataDir)
		return counters{server: p.cpuTime(), db: db, sessions: sessions, load: cpuTime(os.Getpid())}
	})
	res := load()
	c, st, err := wait()
	res.cpu, res.dbCPU, res.sessionsCPU, res.loadCPU, res.stmts = c.server, c.db, c.sessions, c.load, st
	return res, p.peakRSS(), err
}

// counters are the CPU clocks of a run: the server's, the database's (and
// of it its client sessions') and the load program's.
type counters struct{ server, db, sessions, load time.Duration }

// overWindow reads the counters when the warm-up of a run starting now
// ends (after resetting pg_stat_statements in dsn, unless empty) and when
// its window ends; the function it returns waits for the second reading
// and gives the difference and the statements counted in between.
func (h *harness) overWindow(ctx context.Context, dsn string, read func() counters) func() (counters, stmts, error) {
	type reading struct {
		c   counters
		st  stmts
		err error
	}
	done := make(chan reading, 1)
	go func() {
		var r reading
		sleep := func(d time.Duration) bool {
			select {
			case <-ctx.Done():
				r.err = ctx.Err()
				return false
			case <-time.After(d):
				return true
			}
		}
		defer func() { done <- r }()
		t0 := time.Now()
		if !sleep(h.o.warmup) {
			return
		}
		if dsn != "" {
			if r.err = resetStatements(ctx, dsn); r.err != nil {
				return
			}
		}
		c0 := read()
		if !sleep(h.o.warmup + h.o.window - time.Since(t0)) {
			return
		}
		c1 := read()
		r.c = counters{server: c1.server - c0.server, db: c1.db - c0.db, sessions: c1.sessions - c0.sessions, load: c1.load - c0.load}
		if dsn != "" {
			r.st, r.err = readStatements(ctx, dsn)
		}
	}()
	return func() (counters, stmts, error) {
		r := <-done
		return r.c, r.st, r.err
	}
}

// pin sets the CPUs (taskset's list, e.g. "0" or "0-1") of every thread of
// process pid.
func pin(pid int, cpus string) error {
	if out, err := exec.Command("taskset", "-a", "-c", "-p", cpus, strconv.Itoa(pid)).CombinedOutput(); err != nil {
		return fmt.Errorf("taskset %s %d: %w: %s", cpus, pid, err, out)
	}
	return nil
}

// pinDatabase sets the CPUs of the bench cluster: its postmaster and every
// process it has started (backends started later inherit them).
func pinDatabase(dataDir, cpus string) error {
	pid, err := postmaster(dataDir)
	if err != nil {
		return err
	}
	if err := pin(pid, cpus); err != nil {
		return err
	}
	for _, child := range children(pid) {
		if err := pin(child, cpus); err != nil && statFields(child) != nil {
			return err // not one that has just exited
		}
	}
	return nil
}

// postmaster is the pid of the bench cluster's postmaster.
func postmaster(dataDir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postgres", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
}

// children are the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c := statFields(child); len(c) >= 2 && c[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// resetPeakRSS starts VmHWM again from the current RSS (clear_refs 5), so
// each scenario has its own peak.
func (p *process) resetPeakRSS() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0)
}
