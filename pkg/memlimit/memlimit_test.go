package memlimit

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestWanted(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{name: "neither set", env: map[string]string{}, want: true},
		{name: "GOGC set", env: map[string]string{"GOGC": "100"}, want: false},
		{name: "GOGC off", env: map[string]string{"GOGC": "off"}, want: false},
		{name: "GOMEMLIMIT set", env: map[string]string{"GOMEMLIMIT": "1GiB"}, want: false},
		{name: "both set", env: map[string]string{"GOGC": "50", "GOMEMLIMIT": "200MiB"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, wanted(func(k string) string { return tt.env[k] }))
		})
	}
}

func TestApplyLeavesTheUsersSettingAlone(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	assert.False(t, Apply(func(k string) string { return map[string]string{"GOGC": "200"}[k] }, 1<<20))
	assert.Equal(t, before, debug.SetMemoryLimit(-1))
}

// sink keeps the test's allocation live across collections.
var sink [][]byte

// A live heap near the limit lifts it: the process then runs as without one.
func TestApplyLiftsTheLimitWhenTheLiveHeapNearsIt(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before); sink = nil })

	assert.True(t, Apply(func(string) string { return "" }, 64<<20))
	assert.Equal(t, int64(64<<20), debug.SetMemoryLimit(-1))
	runtime.GC()
	runtime.GC()
	assert.False(t, Lifted(), "a small live heap keeps the limit")

	for range 56 {
		sink = append(sink, make([]byte, 1<<20))
	}
	// The finalizer that checks runs after the collection, on its own
	// goroutine.
	for i := 0; i < 100 && !Lifted(); i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	assert.True(t, Lifted())
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))
}
