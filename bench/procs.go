package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
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
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (in parentheses, which may hold spaces):
	// utime and stime are the 12th and 13th, in clock ticks (100 a second).
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// measure runs load against p, with its peak RSS and CPU time.
func (p *process) measure(load func() result) (result, int64) {
	p.resetPeakRSS()
	cpu, self := p.cpuTime(), cpuTime(os.Getpid())
	res := load()
	res.cpu, res.loadCPU = p.cpuTime()-cpu, cpuTime(os.Getpid())-self
	return res, p.peakRSS()
}

// resetPeakRSS starts VmHWM again from the current RSS (clear_refs 5), so
// each scenario has its own peak.
func (p *process) resetPeakRSS() {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0)
}
