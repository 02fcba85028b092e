package cmd

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/deschedule"
	"github.com/kubectl-rebalance/kubectl-rebalance/pkg/failback"
)

// dashboardFile is the Grafana dashboard of the daemons, from this package.
const dashboardFile = "../../deploy/monitoring/grafana-dashboard.json"

// dashboardPanel is what the test reads of a Grafana panel.
type dashboardPanel struct {
	ID      int              `json:"id"`
	Type    string           `json:"type"`
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// TestGrafanaDashboardQueriesExportedMetrics keeps the dashboard and the
// daemons' metrics in step: every metric a panel queries is one the
// daemons export (a renamed metric would leave a panel empty without a
// word), and every family of the daemons' own has a panel.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var dashboard struct {
		Title      string           `json:"title"`
		UID        string           `json:"uid"`
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(data, &dashboard), "the dashboard is not valid JSON")
	require.NotEmpty(t, dashboard.Title)
	require.NotEmpty(t, dashboard.UID)
	assert.True(t, slices.ContainsFunc(dashboard.Templating.List, func(v struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}) bool {
		return v.Name == "datasource" && v.Type == "datasource"
	}), "the dashboard lets the user pick the Prometheus data source")

	exported, own := daemonMetricNames(t)
	used := map[string][]string{} // series name -> panels
	ids := map[int]string{}
	var walk func([]dashboardPanel)
	walk = func(panels []dashboardPanel) {
		for _, p := range panels {
			if other, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if !assert.NotEmpty(t, p.Targets, "panel %q queries nothing", p.Title) {
				continue
			}
			for _, target := range p.Targets {
				names := promqlMetricNames(target.Expr)
				assert.NotEmpty(t, names, "panel %q: %q selects no metric", p.Title, target.Expr)
				for _, name := range names {
					used[name] = append(used[name], p.Title)
					assert.True(t, exported[name], "panel %q queries %s, which neither daemon exports (expression %q)", p.Title, name, target.Expr)
				}
			}
		}
	}
	walk(dashboard.Panels)

	for family, series := range own {
		shown := slices.ContainsFunc(series, func(s string) bool { return len(used[s]) > 0 })
		assert.True(t, shown, "no panel shows %s (series %s)", family, strings.Join(series, ", "))
	}
}

// daemonMetricNames builds the registries the daemons build (daemonMetrics
// and their own metrics) and returns every series name they export,
// histograms' and summaries' _bucket, _sum and _count included, and the
// families of the daemons' own metrics with their series names.
func daemonMetricNames(t *testing.T) (exported map[string]bool, own map[string][]string) {
	t.Helper()
	exported, own = map[string]bool{}, map[string][]string{}
	for _, register := range []func(prometheus.Registerer) error{
		func(r prometheus.Registerer) error { _, err := deschedule.NewMetrics(r); return err },
		func(r prometheus.Registerer) error { _, err := failback.NewMetrics(r); return err },
	} {
		reg := daemonMetrics()
		rec := &recordingRegisterer{Registerer: reg}
		require.NoError(t, register(rec))
		// The Go and process collectors always have values to gather.
		families, err := reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			for _, name := range seriesNames(f.GetName(), f.GetType()) {
				exported[name] = true
			}
		}
		// A vector without label values yet gathers nothing: its name
		// comes from its description, its type from the collector.
		for _, c := range rec.collectors {
			for _, name := range describedNames(t, c) {
				series := seriesNames(name, collectorType(c))
				own[name] = series
				for _, s := range series {
					exported[s] = true
				}
			}
		}
	}
	require.NotEmpty(t, own, "the daemons register no metric of their own")
	return exported, own
}

// recordingRegisterer remembers the collectors registered through it.
type recordingRegisterer struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// fqNamePattern reads the name out of a prometheus.Desc, which has no getter.
var fqNamePattern = regexp.MustCompile(`fqName: "([^"]+)"`)

func describedNames(t *testing.T, c prometheus.Collector) []string {
	t.Helper()
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	var names []string
	for d := range ch {
		m := fqNamePattern.FindStringSubmatch(d.String())
		require.NotNil(t, m, "cannot read the name of %s", d)
		names = append(names, m[1])
	}
	return names
}

func collectorType(c prometheus.Collector) dto.MetricType {
	switch c.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		return dto.MetricType_HISTOGRAM
	case prometheus.Summary, *prometheus.SummaryVec:
		return dto.MetricType_SUMMARY
	}
	return dto.MetricType_UNTYPED
}

// seriesNames are the names a family's samples carry in PromQL.
func seriesNames(name string, kind dto.MetricType) []string {
	switch kind {
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		return []string{name + "_bucket", name + "_sum", name + "_count"}
	case dto.MetricType_SUMMARY:
		return []string{name, name + "_sum", name + "_count"}
	}
	return []string{name}
}

var (
	promqlStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlVars     = regexp.MustCompile(`\$\{[^}]*\}|\$\w+`)
	promqlIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlKeywords = map[string]bool{
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"bool": true, "offset": true, "and": true, "or": true, "unless": true, "atan2": true, "inf": true, "nan": true,
	}
)

// promqlMetricNames returns the metric names a PromQL expression selects,
// sorted: what is left once strings, label matchers, ranges, grouping
// labels and Grafana variables are taken out, less function and
// aggregation names (followed by a parenthesis) and keywords. It knows the
// PromQL the dashboard writes, not every corner of the language.
func promqlMetricNames(expr string) []string {
	expr = promqlStrings.ReplaceAllString(expr, " ")
	expr = promqlMatchers.ReplaceAllString(expr, " ")
	expr = promqlRanges.ReplaceAllString(expr, " ")
	expr = promqlGrouping.ReplaceAllString(expr, " ")
	expr = promqlVars.ReplaceAllString(expr, " ")
	seen := map[string]bool{}
	for _, loc := range promqlIdent.FindAllStringIndex(expr, -1) {
		name := expr[loc[0]:loc[1]]
		if loc[0] > 0 && isDigitOrDot(expr[loc[0]-1]) {
			continue // the exponent or unit of a number (1e3, 5m)
		}
		if strings.HasPrefix(strings.TrimLeft(expr[loc[1]:], " \t\n"), "(") || promqlKeywords[strings.ToLower(name)] {
			continue
		}
		seen[name] = true
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func isDigitOrDot(b byte) bool { return b >= '0' && b <= '9' || b == '.' }

func TestPromqlMetricNames(t *testing.T) {
	tests := []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sum(kubectl_rebalance_failback_leader)`, []string{"kubectl_rebalance_failback_leader"}},
		{`sum by (cluster) (increase(a_total{job=~"$job", cluster!="x"}[$__rate_interval]))`, []string{"a_total"}},
		{`histogram_quantile(0.95, sum by (le) (rate(d_bucket[5m])))`, []string{"d_bucket"}},
		{`sum(rate(d_sum[1m])) / sum without (pod) (rate(d_count[1m]))`, []string{"d_count", "d_sum"}},
		{`time() - max(last_seconds)`, []string{"last_seconds"}},
		{`a > bool 1e3 or on (x) group_left (y) b offset 5m`, []string{"a", "b"}},
		{`label_replace(m, "dst", "$1", "src", "(.*)")`, []string{"m"}},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, promqlMetricNames(tt.expr), tt.expr)
	}
}
