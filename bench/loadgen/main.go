// Command loadgen sends AdmissionReview requests to a webhook at a fixed rate, open loop,
// over a few keep-alive HTTPS connections (HTTP/1.1, as to an aiohttp server), and prints
// each request's latency from its due time, in microseconds, as JSON.
//
// It is bench/webhook.py's default client: a compiled client (the real caller of a webhook,
// the API server, is Go too) keeps the load generator's own pauses out of the server's
// figures on a machine with few CPUs. Standard library only; bench/webhook.py builds it.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type result struct {
	Sent      int     `json:"sent"`
	Failed    int64   `json:"failed"`
	ElapsedS  float64 `json:"elapsed_s"`
	LatencyUS []int64 `json:"latency_us"`
	// LatenessUS is, per request, how late this client itself began to send it: from its
	// due time to the moment its goroutine ran (timer and scheduler delay on this machine,
	// part of LatencyUS, but no server's doing).
	LatenessUS []int64 `json:"lateness_us"`
	FirstError string  `json:"first_error,omitempty"`
	// ServerCPUTicks is the server process's user+system CPU time over the measured
	// requests, in /proc clock ticks (with -pid).
	ServerCPUTicks int64 `json:"server_cpu_ticks"`
}

// cpuTicks is the user+system CPU time of process pid, from /proc/<pid>/stat.
func cpuTicks(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		fail(err)
	}
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	var ticks int64
	for _, field := range fields[11:13] {
		value, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			fail(err)
		}
		ticks += value
	}
	return ticks
}

func main() {
	url := flag.String("url", "", "webhook URL")
	caFile := flag.String("ca", "", "PEM file of the CA that signed the server's certificate")
	bodyFile := flag.String("bodies", "", "file of request bodies, one JSON document per line")
	rate := flag.Float64("rate", 1000, "requests per second")
	duration := flag.Float64("duration", 10, "seconds of load")
	connections := flag.Int("connections", 2, "keep-alive connections")
	warmup := flag.Int("warmup", 200, "requests sent before the measured ones")
	pid := flag.Int("pid", 0, "server process whose CPU time to report")
	flag.Parse()

	ca, err := os.ReadFile(*caFile)
	if err != nil {
		fail(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		fail(fmt.Errorf("no certificate in %s", *caFile))
	}
	raw, err := os.ReadFile(*bodyFile)
	if err != nil {
		fail(err)
	}
	var bodies [][]byte
	for _, line := range bytes.Split(raw, []byte("\n")) {
		if len(line) > 0 {
			bodies = append(bodies, line)
		}
	}
	if len(bodies) == 0 {
		fail(fmt.Errorf("no request body in %s", *bodyFile))
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxConnsPerHost:     *connections,
		MaxIdleConnsPerHost: *connections,
		IdleConnTimeout:     time.Minute,
		ForceAttemptHTTP2:   false,
	}
	client := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	var failed atomic.Int64
	var firstError atomic.Value
	send := func(body []byte) bool {
		response, err := client.Post(*url, "application/json", bytes.NewReader(body))
		if err != nil {
			firstError.CompareAndSwap(nil, err.Error())
			return false
		}
		answer, err := io.ReadAll(response.Body)
		response.Body.Close()
		if err != nil || response.StatusCode != http.StatusOK ||
			!bytes.Contains(answer, []byte(`"allowed":true`)) {
			firstError.CompareAndSwap(nil, fmt.Sprintf("status %d: %.200s", response.StatusCode, answer))
			return false
		}
		return true
	}

	var wg sync.WaitGroup
	for i := 0; i < *warmup; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); send(bodies[0]) }()
		if i%(*connections) == *connections-1 {
			wg.Wait()
		}
	}
	wg.Wait()

	cpuBefore := cpuTicks(*pid)
	total := int(*rate * *duration)
	latencies := make([]int64, total)
	lateness := make([]int64, total)
	interval := float64(time.Second) / *rate
	start := time.Now().Add(50 * time.Millisecond)
	// Pace on this goroutine's own OS thread with the kernel's timer: time.Sleep wakes
	// through the runtime's network poller, whose epoll timeout has millisecond granularity
	// on Linux, so it woke 0.55 ms late at the median and 1.1 ms at the 99th percentile here
	// (nanosleep: 0.09 and 0.31 ms). Latency counts from the due time, so a late client
	// would be charged to the server.
	runtime.LockOSThread()
	for i := 0; i < total; i++ {
		due := start.Add(time.Duration(float64(i) * interval))
		sleepUntil(due)
		wg.Add(1)
		go func(i int, due time.Time) {
			defer wg.Done()
			lateness[i] = time.Since(due).Microseconds()
			if !send(bodies[i%len(bodies)]) {
				failed.Add(1)
			}
			latencies[i] = time.Since(due).Microseconds()
		}(i, due)
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	out := result{
		Sent:           total,
		Failed:         failed.Load(),
		ElapsedS:       elapsed,
		LatencyUS:      latencies,
		LatenessUS:     lateness,
		ServerCPUTicks: cpuTicks(*pid) - cpuBefore,
	}
	if message, ok := firstError.Load().(string); ok {
		out.FirstError = message
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

// sleepUntil blocks the calling OS thread until t (nanosleep, resumed after a signal).
func sleepUntil(t time.Time) {
	for {
		wait := time.Until(t)
		if wait <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(wait))
		_ = syscall.Nanosleep(&ts, nil) // EINTR: the loop sleeps the rest
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "loadgen:", err)
	os.Exit(2)
}
