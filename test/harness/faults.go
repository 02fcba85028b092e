package harness

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Faults a FaultProxy injects.
const (
	// FaultThrottle answers 429 with Retry-After: 1, as API priority and
	// fairness does.
	FaultThrottle = "429"
	// FaultInternal answers 500 without a Status body.
	FaultInternal = "500"
	// FaultUnavailable answers 503, as an apiserver shutting down does.
	FaultUnavailable = "503"
	// FaultReset closes the connection without an answer; the request never
	// reaches the server.
	FaultReset = "reset"
	// FaultLatency holds the request 0.5-2 s before forwarding it.
	FaultLatency = "latency"
	// FaultLostAnswer forwards a write, lets the server apply it, and then
	// closes the connection instead of answering: the client cannot know
	// that its write landed.
	FaultLostAnswer = "lost-answer"
)

// FaultOptions configure a FaultProxy.
type FaultOptions struct {
	// Rate is the share of eligible requests (everything but watches) that
	// get a fault.
	Rate float64
	// Seed makes the sequence of faults repeatable.
	Seed uint64
}

// FaultStats are the figures of a FaultProxy.
type FaultStats struct {
	// Requests counts every request; Eligible those that could get a fault
	// (watches are passed through: a broken watch is re-established by
	// design and says nothing about the plugin).
	Requests, Eligible int
	// Faults counts the injected faults by kind.
	Faults map[string]int
	// Retries counts requests that repeated (method and path) one that got
	// a fault.
	Retries int
	// Upstream5xx counts answers of 500 and more the proxy passed on or made
	// itself because the server was away (502 during a restart).
	Upstream5xx int
}

// TotalFaults is the number of injected faults.
func (s FaultStats) TotalFaults() int {
	n := 0
	for _, v := range s.Faults {
		n += v
	}
	return n
}

// String prints the figures on one line.
func (s FaultStats) String() string {
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(s.Faults)) {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, s.Faults[k]))
	}
	rate := 0.0
	if s.Eligible > 0 {
		rate = 100 * float64(s.TotalFaults()) / float64(s.Eligible)
	}
	return fmt.Sprintf("requests %d (eligible %d), faults %d (%.1f%% of eligible: %s), retries %d, 5xx from the server or its absence %d",
		s.Requests, s.Eligible, s.TotalFaults(), rate, strings.Join(kinds, " "), s.Retries, s.Upstream5xx)
}

// FaultProxy is a plain-HTTP reverse proxy on 127.0.0.1 in front of the
// Karmada apiserver that injects faults into the requests of a command
// pointed at its kubeconfig, and counts the trigger writes that reached the
// server, per binding.
type FaultProxy struct {
	// Kubeconfig is a kubeconfig file whose only context, karmada-apiserver,
	// goes through the proxy.
	Kubeconfig string

	opts    FaultOptions
	forward *httputil.ReverseProxy
	server  *http.Server

	mu      sync.Mutex
	rng     *rand.Rand
	enabled bool
	stats   FaultStats
	faulted map[string]bool
	// triggers counts, per binding path, the trigger writes the server
	// accepted (2xx), whether or not the client heard the answer.
	triggers map[string]int
}

// StartFaultProxy starts a fault-injecting proxy that forwards with the
// admin credentials. Faults are on from the start; SetEnabled turns them off.
func (cp *ControlPlane) StartFaultProxy(opts FaultOptions) (*FaultProxy, error) {
	transport, err := rest.TransportFor(cp.Karmada)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(cp.Karmada.Host)
	if err != nil {
		return nil, err
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.Transport = transport
	forward.FlushInterval = -1
	p := &FaultProxy{
		opts: opts, forward: forward, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		enabled: true, stats: FaultStats{Faults: map[string]int{}}, faulted: map[string]bool{}, triggers: map[string]int{},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.server = &http.Server{Handler: http.HandlerFunc(p.serve)}
	go func() { _ = p.server.Serve(l) }()

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[KarmadaContext] = &clientcmdapi.Cluster{Server: "http://" + l.Addr().String()}
	cfg.AuthInfos[KarmadaContext] = &clientcmdapi.AuthInfo{}
	cfg.Contexts[KarmadaContext] = &clientcmdapi.Context{Cluster: KarmadaContext, AuthInfo: KarmadaContext, Namespace: "default"}
	cfg.CurrentContext = KarmadaContext
	dir, err := os.MkdirTemp(cp.Dir, "faults-")
	if err != nil {
		p.Close()
		return nil, err
	}
	p.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		p.Close()
		return nil, fmt.Errorf("write fault proxy kubeconfig: %w", err)
	}
	return p, nil
}

// Close stops the proxy.
func (p *FaultProxy) Close() { _ = p.server.Close() }

// SetEnabled turns fault injection on or off; counting goes on.
func (p *FaultProxy) SetEnabled(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.enabled = on
}

// Stats returns a copy of the figures so far.
func (p *FaultProxy) Stats() FaultStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Faults = maps.Clone(p.stats.Faults)
	return s
}

// TriggerWrites returns, per binding name ("namespace/name", or "name" for a
// ClusterResourceBinding), how many trigger writes the server accepted.
func (p *FaultProxy) TriggerWrites() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.triggers))
	for path, n := range p.triggers {
		out[bindingKeyOf(path)] = n
	}
	return out
}

// ResetCounts forgets the figures and the trigger writes.
func (p *FaultProxy) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats = FaultStats{Faults: map[string]int{}}
	p.faulted = map[string]bool{}
	p.triggers = map[string]int{}
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	watch := r.URL.Query().Get("watch") == "true"
	key := r.Method + " " + r.URL.Path
	body, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	isTrigger := r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "bindings/") &&
		bytes.Contains(body, []byte("rescheduleTriggeredAt")) && r.URL.Query().Get("dryRun") == ""

	p.mu.Lock()
	p.stats.Requests++
	if p.faulted[key] {
		p.stats.Retries++
		delete(p.faulted, key)
	}
	fault := ""
	if !watch {
		p.stats.Eligible++
		if p.enabled && p.rng.Float64() < p.opts.Rate {
			kinds := []string{FaultThrottle, FaultInternal, FaultUnavailable, FaultReset, FaultLatency}
			if r.Method != http.MethodGet {
				kinds = append(kinds, FaultLostAnswer, FaultLostAnswer)
			}
			fault = kinds[p.rng.IntN(len(kinds))]
			p.stats.Faults[fault]++
			if fault != FaultLatency {
				p.faulted[key] = true
			}
		}
	}
	latency := 500*time.Millisecond + time.Duration(p.rng.Int64N(int64(1500*time.Millisecond)))
	p.mu.Unlock()

	switch fault {
	case FaultThrottle:
		w.Header().Set("Retry-After", "1")
		writeFaultStatus(w, http.StatusTooManyRequests, "TooManyRequests", "too many requests, please try again later")
		return
	case FaultInternal:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "injected internal error")
		return
	case FaultUnavailable:
		writeFaultStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the server is currently unable to handle the request")
		return
	case FaultReset:
		hangUp(w)
		return
	case FaultLatency:
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}

	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if fault == FaultLostAnswer {
		// The server gets the write and answers; the client does not hear it.
		rec := httptest.NewRecorder()
		p.forward.ServeHTTP(rec, r)
		p.observe(r, rec.Code, isTrigger)
		hangUp(w)
		return
	}
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	p.forward.ServeHTTP(sw, r)
	p.observe(r, sw.code, isTrigger)
}

func (p *FaultProxy) observe(r *http.Request, code int, isTrigger bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if code >= 500 {
		p.stats.Upstream5xx++
	}
	if isTrigger && code >= 200 && code < 300 {
		p.triggers[r.URL.Path]++
	}
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func writeFaultStatus(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":%q,"reason":%q,"code":%d}`, message, reason, code)
}

// bindingKeyOf turns a binding's API path into namespace/name (or name).
func bindingKeyOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := range parts {
		if parts[i] == "namespaces" && i+3 < len(parts) {
			return parts[i+1] + "/" + parts[i+3]
		}
	}
	return parts[len(parts)-1]
}

// statusWriter remembers the status code written through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection underneath.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
