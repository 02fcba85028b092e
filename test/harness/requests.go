package harness

import (
	"bufio"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// RequestCounter counts the API requests a client sends, by verb, for
// benchmarks that report the cost of a run in requests rather than seconds.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// spans holds, by verb, when the first and the last request were sent:
	// a benchmark breaks a run's wall time down by them.
	spans map[string][2]time.Time
}

// NewRequestCounter returns an empty counter.
func NewRequestCounter() *RequestCounter {
	return &RequestCounter{counts: map[string]int{}, spans: map[string][2]time.Time{}}
}

// Wrap makes every client built from cfg count its requests here.
func (c *RequestCounter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			c.add(requestVerb(req), 1)
			return rt.RoundTrip(req)
		})
	})
	return out
}

func (c *RequestCounter) add(verb string, n int) {
	now := time.Now()
	c.mu.Lock()
	c.counts[verb] += n
	span, ok := c.spans[verb]
	if !ok {
		span[0] = now
	}
	span[1] = now
	c.spans[verb] = span
	c.mu.Unlock()
}

// Span returns when the first and the last request of verb were counted;
// ok is false if none was.
func (c *RequestCounter) Span(verb string) (first, last time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	span, ok := c.spans[verb]
	return span[0], span[1], ok
}

// Counts returns a copy of the counts by verb.
func (c *RequestCounter) Counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Total is the number of requests counted.
func (c *RequestCounter) Total() int {
	total := 0
	for _, n := range c.Counts() {
		total += n
	}
	return total
}

// String formats the counts as "GET=3 PATCH=2 (total 5)".
func (c *RequestCounter) String() string {
	return FormatCounts(c.Counts())
}

// FormatCounts formats request counts by verb, sorted by verb.
func FormatCounts(counts map[string]int) string {
	total := 0
	parts := make([]string, 0, len(counts))
	for _, verb := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s=%d", verb, counts[verb]))
		total += counts[verb]
	}
	return fmt.Sprintf("%s (total %d)", strings.Join(parts, " "), total)
}

// requestVerb names a request as the apiserver's audit log would: LIST and
// WATCH are GETs on a collection.
func requestVerb(req *http.Request) string {
	verb := req.Method
	if verb == http.MethodGet {
		switch {
		case req.URL.Query().Get("watch") == "true":
			verb = "WATCH"
		case isCollection(req.URL.Path):
			verb = "LIST"
		}
	}
	return verb
}

// isCollection reports whether an API path names a collection
// (/api/v1/namespaces/x/pods, /apis/g/v/things) rather than one object.
func isCollection(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) > 0 && parts[0] == "api":
		if len(parts) < 2 {
			return false
		}
		parts = parts[2:] // api, version
	case len(parts) > 0 && parts[0] == "apis":
		if len(parts) < 3 {
			return false
		}
		parts = parts[3:] // apis, group, version
	default:
		return false
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:]
	}
	return len(parts) == 1
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

var clientRequestLine = regexp.MustCompile(`^rest_client_requests_total\{([^}]*)\} ([0-9.e+]+)$`)

// ComponentRequests reads the client-go request counter of a Karmada
// component ("karmada-controller-manager" or "karmada-scheduler") from its
// metrics endpoint, by verb (method), for the requests to the Karmada
// apiserver.
func (cp *ControlPlane) ComponentRequests(component string) (map[string]int, error) {
	url, ok := cp.metrics[component]
	if !ok {
		return nil, fmt.Errorf("no metrics endpoint for %s", component)
	}
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	counts := map[string]int{}
	host := strings.TrimPrefix(cp.Karmada.Host, "https://")
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1024*1024), 16*1024*1024)
	for sc.Scan() {
		m := clientRequestLine.FindStringSubmatch(sc.Text())
		if m == nil || !strings.Contains(m[1], host) {
			continue
		}
		method := labelValue(m[1], "method")
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		counts[method] += int(v)
	}
	return counts, sc.Err()
}

func labelValue(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
