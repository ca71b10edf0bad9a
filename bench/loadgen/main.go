// Command loadgen sends AdmissionReview requests to a webhook at a fixed rate, open loop,
// over a few keep-alive HTTPS connections (HTTP/1.1, as to an aiohttp server), and prints
// each request's latency from its due time, in microseconds, as JSON.
//
// It is bench/webhook.py's default client: a compiled client (the real caller of a webhook,
// the API server, is Go too) keeps the load generator's own pauses out of the server's
// figures on a machine with few CPUs. Standard library only; bench/webhook.py builds it.
//
// Two ways to send (-mode):
//
//   - conn (the default): one goroutine per keep-alive connection takes the next due
//     request from a queue, writes it whole (one Write, as net/http's buffered writer does,
//     with net/http's headers) and reads its answer with net/http's response parser:
//     0.18 ms of CPU and about 9 context switches a request here.
//   - nethttp: net/http's client, a goroutine per request, handed between the transport's
//     read and write goroutines: 0.32 ms of CPU and 12 context switches a request here, on
//     the same two CPUs as the server under test.
//
// Either way a request waits for a free connection (one request in flight per connection,
// no pipelining, as the API server's client does) and that wait counts in its latency.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
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
	// due time to the moment it was handed to a connection's queue (-mode conn) or its
	// goroutine ran (-mode nethttp): timer and scheduler delay on this machine, part of
	// LatencyUS, but no server's doing.
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

// sender sends requests without waiting for their answers.
type sender interface {
	// send starts one request: onStart runs when it begins (its goroutine ran, or it was
	// queued for a connection), onDone when its answer is read, with whether that was a 200
	// that allowed the review.
	send(body []byte, onStart func(), onDone func(ok bool))
	close()
}

// checker records the first failure.
type checker struct {
	firstError atomic.Value
}

func (c *checker) check(status int, answer []byte, err error) bool {
	if err != nil {
		c.firstError.CompareAndSwap(nil, err.Error())
		return false
	}
	if status != http.StatusOK || !bytes.Contains(answer, []byte(`"allowed":true`)) {
		c.firstError.CompareAndSwap(nil, fmt.Sprintf("status %d: %.200s", status, answer))
		return false
	}
	return true
}

// netHTTPSender is net/http's client with at most `connections` connections.
type netHTTPSender struct {
	url    string
	client *http.Client
	*checker
}

func newNetHTTPSender(url string, config *tls.Config, connections int, c *checker) *netHTTPSender {
	transport := &http.Transport{
		TLSClientConfig:     config,
		MaxConnsPerHost:     connections,
		MaxIdleConnsPerHost: connections,
		IdleConnTimeout:     time.Minute,
		ForceAttemptHTTP2:   false,
	}
	return &netHTTPSender{
		url:     url,
		client:  &http.Client{Transport: transport, Timeout: 30 * time.Second},
		checker: c,
	}
}

func (s *netHTTPSender) send(body []byte, onStart func(), onDone func(ok bool)) {
	go func() {
		onStart()
		response, err := s.client.Post(s.url, "application/json", bytes.NewReader(body))
		if err != nil {
			onDone(s.check(0, nil, err))
			return
		}
		answer, err := io.ReadAll(response.Body)
		response.Body.Close()
		onDone(s.check(response.StatusCode, answer, err))
	}()
}

func (s *netHTTPSender) close() {}

// connSender keeps `connections` TLS connections, each served by one goroutine that takes
// the next request from a shared queue.
type connSender struct {
	queue chan job
	done  sync.WaitGroup
	*checker
}

type job struct {
	request []byte
	onDone  func(ok bool)
}

func newConnSender(url *neturl.URL, config *tls.Config, connections int, c *checker) *connSender {
	s := &connSender{queue: make(chan job, 1<<16), checker: c}
	for i := 0; i < connections; i++ {
		conn, err := tls.Dial("tcp", url.Host, config)
		if err != nil {
			fail(err)
		}
		s.done.Add(1)
		go s.serve(conn)
	}
	return s
}

func (s *connSender) serve(conn *tls.Conn) {
	defer s.done.Done()
	defer conn.Close()
	reader := bufio.NewReaderSize(conn, 16<<10)
	for j := range s.queue {
		if _, err := conn.Write(j.request); err != nil {
			j.onDone(s.check(0, nil, err))
			fail(fmt.Errorf("connection lost: %w", err))
		}
		response, err := http.ReadResponse(reader, nil)
		if err != nil {
			j.onDone(s.check(0, nil, err))
			fail(fmt.Errorf("connection lost: %w", err))
		}
		answer, err := io.ReadAll(response.Body)
		response.Body.Close()
		if response.Close {
			fail(fmt.Errorf("the server closed the keep-alive connection"))
		}
		j.onDone(s.check(response.StatusCode, answer, err))
	}
}

func (s *connSender) send(request []byte, onStart func(), onDone func(ok bool)) {
	onStart()
	s.queue <- job{request: request, onDone: onDone}
}

func (s *connSender) close() {
	close(s.queue)
	s.done.Wait()
}

// rawRequest is the HTTP/1.1 request net/http's client writes for a POST of body, whole.
func rawRequest(url *neturl.URL, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: Go-http-client/1.1\r\n"+
		"Content-Length: %d\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n",
		url.RequestURI(), url.Host, len(body))
	b.Write(body)
	return b.Bytes()
}

func main() {
	url := flag.String("url", "", "webhook URL")
	caFile := flag.String("ca", "", "PEM file of the CA that signed the server's certificate")
	serverName := flag.String("servername", "", "the name the server's certificate is checked "+
		"against (default: the URL's host)")
	bodyFile := flag.String("bodies", "", "file of request bodies, one JSON document per line")
	rate := flag.Float64("rate", 1000, "requests per second")
	duration := flag.Float64("duration", 10, "seconds of load")
	connections := flag.Int("connections", 2, "keep-alive connections")
	warmup := flag.Int("warmup", 200, "requests sent before the measured ones")
	pid := flag.Int("pid", 0, "server process whose CPU time to report")
	mode := flag.String("mode", "conn", "conn (a goroutine per connection) or nethttp "+
		"(net/http's client)")
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

	config := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: *serverName}
	checks := &checker{}
	var client sender
	switch *mode {
	case "conn":
		parsed, err := neturl.Parse(*url)
		if err != nil {
			fail(err)
		}
		client = newConnSender(parsed, config, *connections, checks)
		for i, body := range bodies {
			bodies[i] = rawRequest(parsed, body)
		}
	case "nethttp":
		client = newNetHTTPSender(*url, config, *connections, checks)
	default:
		fail(fmt.Errorf("-mode must be conn or nethttp, got %q", *mode))
	}

	var wg sync.WaitGroup
	for i := 0; i < *warmup; i++ {
		wg.Add(1)
		client.send(bodies[0], func() {}, func(bool) { wg.Done() })
		if i%(*connections) == *connections-1 {
			wg.Wait()
		}
	}
	wg.Wait()

	cpuBefore := cpuTicks(*pid)
	total := int(*rate * *duration)
	latencies := make([]int64, total)
	lateness := make([]int64, total)
	var failed atomic.Int64
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
		client.send(bodies[i%len(bodies)],
			func() { lateness[i] = time.Since(due).Microseconds() },
			func(ok bool) {
				if !ok {
					failed.Add(1)
				}
				latencies[i] = time.Since(due).Microseconds()
				wg.Done()
			})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	serverTicks := cpuTicks(*pid) - cpuBefore
	client.close()
	out := result{
		Sent:           total,
		Failed:         failed.Load(),
		ElapsedS:       elapsed,
		LatencyUS:      latencies,
		LatenessUS:     lateness,
		ServerCPUTicks: serverTicks,
	}
	if message, ok := checks.firstError.Load().(string); ok {
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
