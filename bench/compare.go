package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// compare runs every comparison case runs times, each in a fresh process
// with its own private redis-server, and prints the medians.
func compare(runs, n int) int {
	ns := strconv.Itoa(n)
	// Redis's default configuration (hash-max-listpack-value 64), as most
	// deployments run it.
	cases := []struct {
		name string
		args []string
	}{
		{"enqueue, 1 producer", []string{"-scenario", "enqueue", "-producers", "1", "-n", strconv.Itoa(n / 5)}},
		{"enqueue, 16 producers", []string{"-scenario", "enqueue", "-producers", "16", "-n", ns}},
		{"enqueue, 16 producers, keys / TaskID", []string{"-scenario", "enqueue", "-producers", "16", "-idem", "-n", ns}},
		{"produce + consume, 16 producers, concurrency 32", []string{"-scenario", "pc", "-producers", "16", "-concurrency", "32", "-n", ns}},
		{"end to end, concurrency 32", []string{"-scenario", "e2e", "-concurrency", "32", "-n", ns}},
		{"latency at 2000/s", []string{"-scenario", "latency", "-rate", "2000", "-duration", "10s"}},
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tsystem\ttasks/s\tp50 ms\tp99 ms\tcmds/task\tcpu µs/task\tbytes/task\tratio\t")
	for _, c := range cases {
		var dtqRate float64
		for _, sys := range []string{"dtq", "asynq"} {
			var rs []result
			for range runs {
				r, err := runOnce(append([]string{"-system", sys, "-listpack-value", "64"}, c.args...))
				if err != nil {
					fmt.Fprintln(os.Stderr, c.name, sys, err)
					return 1
				}
				b, _ := json.Marshal(r)
				fmt.Fprintln(os.Stderr, string(b))
				rs = append(rs, r)
			}
			m := median(rs)
			ratio := ""
			if sys == "dtq" {
				dtqRate = m.PerSecond
			} else if m.PerSecond > 0 && c.args[1] != "latency" {
				ratio = fmt.Sprintf("dtq %.2fx", dtqRate/m.PerSecond)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.1f\t%.1f\t%.0f\t%s\t\n", c.name, sys, m.PerSecond, m.P50ms, m.P99ms,
				m.CmdsPerTask, m.CPUusPerTask, m.BytesPerTask, ratio)
		}
	}
	tw.Flush()
	return 0
}

func runOnce(args []string) (result, error) {
	cmd := exec.Command(os.Args[0], args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return result{}, err
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "{") {
			var r result
			err := json.Unmarshal([]byte(line), &r)
			return r, err
		}
	}
	return result{}, fmt.Errorf("no result line")
}

// median takes each figure's median over the runs.
func median(rs []result) result {
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return result{
		PerSecond:    pick(func(r result) float64 { return r.PerSecond }),
		P50ms:        pick(func(r result) float64 { return r.P50ms }),
		P99ms:        pick(func(r result) float64 { return r.P99ms }),
		CmdsPerTask:  pick(func(r result) float64 { return r.CmdsPerTask }),
		CPUusPerTask: pick(func(r result) float64 { return r.CPUusPerTask }),
		BytesPerTask: pick(func(r result) float64 { return r.BytesPerTask }),
	}
}
