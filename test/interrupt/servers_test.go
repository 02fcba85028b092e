package interrupt

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// hangingServer accepts connections and then stalls at one point of the
// exchange, for good: nothing in it ends the stall but the client closing
// the connection or the test ending, so a client that ignores a signal or
// a deadline stays stuck.
type hangingServer struct {
	ln      net.Listener
	scheme  string
	reached chan struct{} // closed once a client got to the stall
	once    sync.Once
	mu      sync.Mutex
	conns   []net.Conn
}

// stall is what a server does with a connection before it stops for good.
// It returns false when the client is not the kind the server waits for.
type stall func(c net.Conn) bool

// silent accepts the connection and never reads from it nor answers.
func silent(net.Conn) bool { return true }

// midHandshake reads the client's first TLS record (the ClientHello) and
// never answers it: the client waits for a ServerHello that never comes.
func midHandshake(c net.Conn) bool {
	header := make([]byte, 5)
	if _, err := c.Read(header); err != nil {
		return false
	}
	return header[0] == 0x16 // a TLS handshake record
}

// headersOnly reads the request, answers its headers with a JSON body of
// 4096 bytes announced, sends its first byte and nothing more.
func headersOnly(c net.Conn) bool {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		if line == "\r\n" {
			break
		}
	}
	_, err := fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{")
	return err == nil
}

func newHangingServer(t *testing.T, scheme string, s stall) *hangingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := &hangingServer{ln: ln, scheme: scheme, reached: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			go func() {
				if s(c) {
					h.once.Do(func() { close(h.reached) })
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.conns {
			_ = c.Close()
		}
	})
	return h
}

func (h *hangingServer) URL() string { return h.scheme + "://" + h.ln.Addr().String() }

// servers are the three ways the tests' server hangs.
var servers = []struct {
	name   string
	scheme string
	stall  stall
}{
	{name: "silent TCP", scheme: "http", stall: silent},
	{name: "stalled TLS handshake", scheme: "https", stall: midHandshake},
	{name: "headers then no body", scheme: "http", stall: headersOnly},
}

// kubeconfigFor writes a kubeconfig whose only context points at server.
func kubeconfigFor(t *testing.T, server string) string {
	t.Helper()
	tls := ""
	if strings.HasPrefix(server, "https:") {
		tls = ", insecure-skip-tls-verify: true"
	}
	path := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: hanging
  cluster: {server: %q%s}
users:
- name: admin
  user: {token: secret}
contexts:
- name: hanging
  context: {cluster: hanging, user: admin, namespace: default}
current-context: hanging
`, server, tls)), 0o600))
	return path
}
