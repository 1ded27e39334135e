package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// profile takes, for each scenario, a CPU profile and the allocations of
// 15 seconds of load against payreq serve, into -profile's folder, and
// prints the top of each.
func (h *harness) profile(ctx context.Context) error {
	o := h.o
	if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
		return err
	}
	p, err := h.startPayreq(h.big, "profile", true, "")
	if err != nil {
		return err
	}
	defer p.stop()
	tok, err := h.token(ctx, p.url, h.key)
	if err != nil {
		return err
	}
	if h.wanted("list_deep") {
		if h.cursor, err = walk(ctx, p.url, tok, 1000); err != nil {
			return err
		}
	}
	fetch := func(path, file string) error {
		resp, err := http.Get("http://" + p.debug + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(o.profileDir, file))
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		return err
	}
	for _, sc := range h.scenarios() {
		if !h.wanted(sc.key) {
			continue
		}
		if sc, err = h.scenarioFor(ctx, sc.key, p.url); err != nil {
			return err
		}
		logf("profiling %s", sc.key)
		done := make(chan result, 1)
		go func() { done <- closedLoop(ctx, p.url, o.clients, 2*time.Second, 16*time.Second, sc.next) }()
		time.Sleep(2 * time.Second)
		if err := fetch("/debug/pprof/allocs", sc.key+".allocs.base.pprof"); err != nil {
			return err
		}
		if err := fetch("/debug/pprof/profile?seconds=15", sc.key+".cpu.pprof"); err != nil {
			return err
		}
		if err := fetch("/debug/pprof/allocs", sc.key+".allocs.pprof"); err != nil {
			return err
		}
		res := <-done
		h.report.add(sc.key, "profile", res, p.peakRSS())
		for _, kind := range []string{"cpu", "allocs"} {
			args := []string{"tool", "pprof", "-top", "-nodecount=30"}
			if kind == "allocs" {
				args = append(args, "-sample_index=alloc_space", "-base", filepath.Join(o.profileDir, sc.key+".allocs.base.pprof"))
			}
			args = append(args, o.payreqBin, filepath.Join(o.profileDir, sc.key+"."+kind+".pprof"))
			out, _ := exec.CommandContext(ctx, "go", args...).CombinedOutput()
			fmt.Printf("==== %s %s\n%s\n", sc.key, kind, out)
		}
	}
	return nil
}
