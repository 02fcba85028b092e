package handover

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/karmada-io/karmada/pkg/generated/clientset/versioned/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecovererByDeadline: a leftover of a process of this host that is
// gone is recovered at once by a command (recover, the next run), but a
// daemon (ByDeadline) waits for its deadline unless the binding changed:
// a failback resumed by the next leader must find its own leftover.
func TestRecovererByDeadline(t *testing.T) {
	host, _ := os.Hostname()
	gone := fmt.Sprintf("%s/%d/dead", host, 1<<22+12345)
	require.True(t, OwnerGone(gone), "no process runs with that pid")
	b := phaseBinding(PhaseStaging, gone, time.Now().Add(time.Hour))
	ctx := context.Background()

	daemon := &Recoverer{Karmada: fake.NewSimpleClientset(b.DeepCopy()), Owner: "daemon/sweep", ByDeadline: true}
	found, err := daemon.Sweep(ctx, "default", false)
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Equal(t, ActionWait, found[0].Decision.Action)
	assert.False(t, found[0].Recovered)

	command := &Recoverer{Karmada: fake.NewSimpleClientset(b.DeepCopy()), Owner: "recover"}
	d, err := command.Recover(ctx, "default", "web-deployment")
	require.NoError(t, err)
	assert.Equal(t, ActionUndo, d.Action)
	assert.True(t, d.Expired)

	changed := b.DeepCopy()
	changed.Spec.Clusters = tc("member1", 1)
	daemon = &Recoverer{Karmada: fake.NewSimpleClientset(changed), Owner: "daemon/sweep", ByDeadline: true}
	found, err = daemon.Sweep(ctx, "default", false)
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.Equal(t, ActionLetGo, found[0].Decision.Action, "a binding changed under the move is let go at once")
	assert.True(t, found[0].Recovered)
}
