package daemon

import "github.com/prometheus/client_golang/prometheus"

// SetLeaderGauge sets a daemon's leader gauge: 1 while this process does the
// work (it holds the Lease, or runs without leader election), else 0.
func SetLeaderGauge(g prometheus.Gauge, leading bool) {
	if leading {
		g.Set(1)
		return
	}
	g.Set(0)
}
