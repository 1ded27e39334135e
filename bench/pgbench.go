package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// pgbench runs scripts (files, each with an optional @weight) from clients
// connections for warmup+window and
// measures the transactions that started inside the window, from its
// per-transaction log. mode is pgbench's -M: the protocol payreq's driver
// speaks. rate > 0 runs it open-loop (-R): transactions scheduled at that
// mean rate, each latency counted from when it was due. cpus, when not
// empty, are the CPUs pgbench runs on (taskset); started is told its pid.
// It runs a second past the window, so that it is there to be read at the
// window's end.
func pgbench(ctx context.Context, bin, dsn string, scripts []string, mode string, vars map[string]string, clients int, rate float64, warmup, window time.Duration, cpus string, started func(pid int)) (result, error) {
	logDir, err := os.MkdirTemp("", "payreq-pgbench-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(logDir)
	secs := int((warmup+window+time.Second-1)/time.Second) + 1
	args := []string{"-n", "-M", mode, "-c", strconv.Itoa(clients), "-j", "2", "-T", strconv.Itoa(secs),
		"-l", "--log-prefix", filepath.Join(logDir, "tx")}
	for _, f := range scripts {
		args = append(args, "-f", f)
	}
	name := filepath.Base(scripts[0])
	if rate > 0 {
		args = append(args, "-R", strconv.FormatFloat(rate, 'f', 0, 64))
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "-D", k+"="+vars[k])
	}
	args = append(args, dsn)
	start := time.Now()
	if cpus != "" {
		args = append([]string{"-c", cpus, bin}, args...)
		bin = "taskset"
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	// Its sessions plan as payreq's prepared ones do (internal/postgres).
	cmd.Env = append(os.Environ(), "PGOPTIONS=-c plan_cache_mode=force_generic_plan")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Start()
	if err == nil {
		started(cmd.Process.Pid)
		err = cmd.Wait()
	}
	out := buf.Bytes()
	if err != nil {
		return result{}, fmt.Errorf("pgbench %s: %w: %s", name, err, lastLines(out, 5))
	}
	// A failed transaction ends its client; pgbench still exits 0 when
	// others ran, so the summary is checked too.
	if s := string(out); strings.Contains(s, "aborted in command") || strings.Contains(s, "client ") && strings.Contains(s, "aborted") {
		return result{}, fmt.Errorf("pgbench %s: a client failed: %s", name, lastLines(out, 8))
	}
	rec := &recorder{from: start.Add(warmup), to: start.Add(warmup + window)}
	files, _ := filepath.Glob(filepath.Join(logDir, "tx*"))
	for _, f := range files {
		if err := readTxLog(f, rec); err != nil {
			return result{}, err
		}
	}
	return rec.result(), nil
}

// readTxLog reads pgbench's per-transaction log: client_id transaction_no
// time(µs) script_no time_epoch time_us, the last two being when it ended,
// and with -R schedule_lag(µs), how long after it was due it started.
func readTxLog(path string, rec *recorder) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		lat, err1 := strconv.ParseInt(fields[2], 10, 64)
		sec, err2 := strconv.ParseInt(fields[4], 10, 64)
		usec, err3 := strconv.ParseInt(fields[5], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("pgbench log %s: unreadable line %q", path, sc.Text())
		}
		if len(fields) >= 7 {
			lag, err := strconv.ParseInt(fields[6], 10, 64)
			if err != nil {
				return fmt.Errorf("pgbench log %s: unreadable line %q", path, sc.Text())
			}
			lat += lag
		}
		d := time.Duration(lat) * time.Microsecond
		end := time.Unix(sec, usec*1000)
		rec.add(end.Add(-d), d, nil)
	}
	return sc.Err()
}

func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
