package harness

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildPlugin(t *testing.T) {
	binary, err := BuildPlugin(t.TempDir())
	require.NoError(t, err)
	out, err := exec.Command(binary, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "Go version:")
}
