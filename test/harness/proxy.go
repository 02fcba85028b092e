package harness

import (
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// CountingProxy is a plain-HTTP reverse proxy on 127.0.0.1 in front of the
// Karmada apiserver that counts every request passing through it. A command
// pointed at its kubeconfig is measured exactly as a user would run it,
// without hooks in the code under test.
type CountingProxy struct {
	// Kubeconfig is a kubeconfig file whose only context, karmada-apiserver,
	// goes through the proxy.
	Kubeconfig string
	// Counter holds the counts.
	Counter *RequestCounter
	// Requests holds each distinct request seen, as "VERB PATH" (VERB as
	// the audit log names it: LIST and WATCH apart from GET), for tests
	// that check which API calls a command makes.
	Requests *RequestSet

	server *http.Server

	mu sync.Mutex
	// answered, when set, sees each answer of the Karmada apiserver before
	// the client does (see OnAnswer).
	answered func(*http.Response)
}

// OnAnswer makes fn see every answer of the Karmada apiserver after the
// server has carried out the request and before the client hears it: a
// test can act at the moment a write has landed while its answer is still
// on its way (Ctrl-C then), or hold the answer back by sleeping in fn.
func (p *CountingProxy) OnAnswer(fn func(*http.Response)) {
	p.mu.Lock()
	p.answered = fn
	p.mu.Unlock()
}

// pullPrefix starts the paths the proxy forwards to a Pull member: the
// command reaches a Pull member through a kubeconfig context of its own
// (the cluster proxy does not serve it), and those requests are counted too.
const pullPrefix = "/pull/"

// StartCountingProxy starts a proxy that forwards with the admin credentials.
// Its kubeconfig holds the karmada-apiserver context only.
func (cp *ControlPlane) StartCountingProxy() (*CountingProxy, error) {
	return cp.startCountingProxy(false)
}

// StartCountingProxyWithPullMembers is StartCountingProxy whose kubeconfig
// also has a context per Pull member, named like the member and going
// through the proxy: a command given it as --member-kubeconfig reads the Pull
// members as a user's members.config lets it, and every request it sends,
// to the Karmada apiserver or to a member, is counted.
func (cp *ControlPlane) StartCountingProxyWithPullMembers() (*CountingProxy, error) {
	return cp.startCountingProxy(true)
}

func (cp *ControlPlane) startCountingProxy(pullMembers bool) (*CountingProxy, error) {
	transport, err := rest.TransportFor(cp.Karmada)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(cp.Karmada.Host)
	if err != nil {
		return nil, err
	}
	counter := NewRequestCounter()
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.Transport = transport
	// Watches stream: pass every event on as it arrives.
	forward.FlushInterval = -1
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	pulls := map[string]http.Handler{}
	if pullMembers {
		for _, m := range cp.Members {
			if !m.Pull {
				continue
			}
			h, err := memberForwarder(m)
			if err != nil {
				return nil, err
			}
			pulls[m.Name] = h
		}
	}
	p := &CountingProxy{Counter: counter, Requests: &RequestSet{seen: map[string]bool{}}}
	forward.ModifyResponse = func(resp *http.Response) error {
		p.mu.Lock()
		fn := p.answered
		p.mu.Unlock()
		if fn != nil {
			fn(resp)
		}
		return nil
	}
	p.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counter.add(requestVerb(r), 1)
		p.Requests.add(requestVerb(r) + " " + r.URL.Path)
		if rest, ok := strings.CutPrefix(r.URL.Path, pullPrefix); ok {
			name, path, _ := strings.Cut(rest, "/")
			if h := pulls[name]; h != nil {
				r.URL.Path, r.URL.RawPath = "/"+path, ""
				h.ServeHTTP(w, r)
				return
			}
		}
		forward.ServeHTTP(w, r)
	})}
	go func() { _ = p.server.Serve(l) }()

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[KarmadaContext] = &clientcmdapi.Cluster{Server: "http://" + l.Addr().String()}
	cfg.AuthInfos[KarmadaContext] = &clientcmdapi.AuthInfo{}
	cfg.Contexts[KarmadaContext] = &clientcmdapi.Context{Cluster: KarmadaContext, AuthInfo: KarmadaContext}
	cfg.CurrentContext = KarmadaContext
	for name := range pulls {
		cfg.Clusters[name] = &clientcmdapi.Cluster{Server: "http://" + l.Addr().String() + pullPrefix + name}
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{}
		cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	dir, err := os.MkdirTemp(cp.Dir, "proxy-")
	if err != nil {
		p.Close()
		return nil, err
	}
	p.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		p.Close()
		return nil, fmt.Errorf("write proxy kubeconfig: %w", err)
	}
	return p, nil
}

// memberForwarder forwards to a member's apiserver with its admin credentials.
func memberForwarder(m *Member) (http.Handler, error) {
	transport, err := rest.TransportFor(m.Config)
	if err != nil {
		return nil, err
	}
	target, err := url.Parse(m.Config.Host)
	if err != nil {
		return nil, err
	}
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.Transport = transport
	forward.FlushInterval = -1
	return forward, nil
}

// RequestSet is a set of requests, safe for concurrent use.
type RequestSet struct {
	mu    sync.Mutex
	seen  map[string]bool
	times map[string]int
}

func (s *RequestSet) add(request string) {
	s.mu.Lock()
	s.seen[request] = true
	if s.times == nil {
		s.times = map[string]int{}
	}
	s.times[request]++
	s.mu.Unlock()
}

// Count returns how many requests were seen whose "VERB path" contains
// part.
func (s *RequestSet) Count(part string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for request, times := range s.times {
		if strings.Contains(request, part) {
			n += times
		}
	}
	return n
}

// List returns the requests seen, sorted.
func (s *RequestSet) List() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.seen))
}

// Close stops the proxy.
func (p *CountingProxy) Close() { _ = p.server.Close() }
