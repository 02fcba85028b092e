package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
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
	// FaultTimeout holds the request without forwarding it until the client
	// gives up or FaultOptions.Hold has passed, then hangs up: a server that
	// never answers. Injected only when Hold is set.
	FaultTimeout = "timeout"
)

// FaultOptions configure a FaultProxy.
type FaultOptions struct {
	// Rate is the share of eligible requests (everything but watches) that
	// get a fault.
	Rate float64
	// Seed makes the sequence of faults repeatable.
	Seed uint64
	// Hold, when set, adds FaultTimeout to the faults and is how long such a
	// request is held; make it longer than the client's request timeout.
	Hold time.Duration
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
	// MemberRequests counts the requests to member clusters through the
	// Karmada cluster proxy (clusters/NAME/proxy/...), MemberFaults the
	// faults injected into them.
	MemberRequests, MemberFaults int
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
	line := fmt.Sprintf("requests %d (eligible %d), faults %d (%.1f%% of eligible: %s), retries %d, 5xx from the server or its absence %d",
		s.Requests, s.Eligible, s.TotalFaults(), rate, strings.Join(kinds, " "), s.Retries, s.Upstream5xx)
	if s.MemberRequests > 0 {
		line += fmt.Sprintf(", member proxy requests %d (faults %d)", s.MemberRequests, s.MemberFaults)
	}
	return line
}

// BindingWrite is an update (PUT) of a ResourceBinding or
// ClusterResourceBinding, not of its status and not a dry run, that the
// server accepted, whether or not the client heard the answer.
type BindingWrite struct {
	// Binding is "namespace/name", or "name" for a ClusterResourceBinding.
	Binding string
	// Sent is when the proxy received the request, Answered when the server's
	// answer came back.
	Sent, Answered time.Time
	// Clusters is the spec.clusters written, as "member1:0,member2:2".
	Clusters string
	// AnswerLost is set when the proxy hung up instead of passing the answer on.
	AnswerLost bool
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
	// updates are the binding updates the server accepted, in order.
	updates []BindingWrite
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
	// A server away (a restart) is counted as a 502, not logged per request.
	forward.ErrorLog = log.New(io.Discard, "", 0)
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

// BindingWrites returns the binding updates the server accepted so far, in
// the order of their answers.
func (p *FaultProxy) BindingWrites() []BindingWrite {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.updates)
}

// ResetCounts forgets the figures and the trigger and binding writes.
func (p *FaultProxy) ResetCounts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats = FaultStats{Faults: map[string]int{}}
	p.faulted = map[string]bool{}
	p.triggers = map[string]int{}
	p.updates = nil
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	watch := r.URL.Query().Get("watch") == "true"
	key := r.Method + " " + r.URL.Path
	body, _ := io.ReadAll(r.Body)
	_ = r.Body.Close()
	isTrigger := r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "bindings/") &&
		bytes.Contains(body, []byte("rescheduleTriggeredAt")) && r.URL.Query().Get("dryRun") == ""
	update := bindingUpdate(r, body)
	member := isMemberProxyPath(r.URL.Path)

	p.mu.Lock()
	p.stats.Requests++
	if member {
		p.stats.MemberRequests++
	}
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
			if p.opts.Hold > 0 {
				kinds = append(kinds, FaultTimeout)
			}
			fault = kinds[p.rng.IntN(len(kinds))]
			p.stats.Faults[fault]++
			if member {
				p.stats.MemberFaults++
			}
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
	case FaultTimeout:
		select {
		case <-time.After(p.opts.Hold):
		case <-r.Context().Done():
		}
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
		p.observe(r, rec.Code, isTrigger, update, true)
		hangUp(w)
		return
	}
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
	p.forward.ServeHTTP(sw, r)
	p.observe(r, sw.code, isTrigger, update, false)
}

func (p *FaultProxy) observe(r *http.Request, code int, isTrigger bool, update *BindingWrite, lost bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if code >= 500 {
		p.stats.Upstream5xx++
	}
	ok := code >= 200 && code < 300
	if isTrigger && ok {
		p.triggers[r.URL.Path]++
	}
	if update != nil && ok {
		update.Answered, update.AnswerLost = time.Now(), lost
		p.updates = append(p.updates, *update)
	}
}

// bindingUpdate describes r when it updates a binding (PUT, not its status,
// not a dry run), and returns nil otherwise.
func bindingUpdate(r *http.Request, body []byte) *BindingWrite {
	if r.Method != http.MethodPut || r.URL.Query().Get("dryRun") != "" || !strings.Contains(r.URL.Path, "/apis/work.karmada.io/") {
		return nil
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 2 || !strings.HasSuffix(parts[len(parts)-2], "bindings") {
		return nil // a subresource (status) or a collection
	}
	var obj struct {
		Spec struct {
			Clusters []struct {
				Name     string `json:"name"`
				Replicas int32  `json:"replicas"`
			} `json:"clusters"`
		} `json:"spec"`
	}
	_ = json.Unmarshal(body, &obj)
	clusters := make([]string, 0, len(obj.Spec.Clusters))
	for _, c := range obj.Spec.Clusters {
		clusters = append(clusters, fmt.Sprintf("%s:%d", c.Name, c.Replicas))
	}
	return &BindingWrite{Binding: bindingKeyOf(r.URL.Path), Sent: time.Now(), Clusters: strings.Join(clusters, ",")}
}

// isMemberProxyPath reports a request to a member cluster through the
// Karmada cluster proxy.
func isMemberProxyPath(path string) bool {
	return strings.HasPrefix(path, "/apis/cluster.karmada.io/") && strings.Contains(path, "/proxy/")
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
