package rebalance

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestReadHandoverHead(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		ann      map[string]string
		ok       bool
		describe string
	}{
		{name: "no ledger", ann: map[string]string{}},
		{name: "unreadable", ann: map[string]string{HandoverAnnotation: "{"}},
		{name: "a move staging", ok: true,
			ann:      map[string]string{HandoverAnnotation: `{"phase":"Staging","owner":"host/1/ab","started":"2026-01-01T11:57:00Z","deadline":"2026-01-01T12:07:00Z","original":[]}`},
			describe: "phase Staging, owner host/1/ab, started 3m ago, deadline in 7m"},
		{name: "past its deadline", ok: true,
			ann:      map[string]string{HandoverAnnotation: `{"phase":"Settling","owner":"daemon","started":"2026-01-01T11:40:00Z","deadline":"2026-01-01T11:50:00Z","original":[]}`},
			describe: "phase Settling, owner daemon, started 20m ago, deadline passed 10m ago"},
		{name: "an older hold without a phase", ok: true,
			ann:      map[string]string{HandoverAnnotation: `{"hold":true,"started":"2026-01-01T11:59:00Z","original":[]}`},
			describe: "phase Held, started 60s ago"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := ReadHandoverHead(tt.ann)
			assert.Equal(t, tt.ok, ok)
			if ok {
				assert.Equal(t, tt.describe, h.Describe(now))
			}
		})
	}
}
