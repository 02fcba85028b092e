package cmd

import (
	"context"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestSecondSignalDoesNotCutTheRecovery: the first Ctrl-C ends the
// command's context; a second one, while the command recovers its moves,
// is answered with a notice instead of ending the process.
func TestSecondSignalDoesNotCutTheRecovery(t *testing.T) {
	notice := &lockedWriter{}
	signalNotice = notice
	t.Cleanup(func() { signalNotice = os.Stderr })
	ctx, stop := signalContext(context.Background())
	defer stop()

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the first SIGINT did not end the context")
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	assert.Eventually(t, func() bool { return strings.Contains(notice.String(), "still recovering") }, 5*time.Second, 10*time.Millisecond,
		"the second SIGINT is answered, and this test process is still alive")
}
