package seed001

import (
	"fmt"

	"github.com/synod-dev/synod/experiment"
)

// seedTables are Tables 1-6 of the ABD report (section 4), copied verbatim from
// the seed's text (tab-separated, as there). Rows are the "GET/PUT ratio",
// read here as the fraction of GETs (see the package comment).
var seedTables = []struct {
	table    int
	protocol string
	n        int
	text     string
}{
	{1, "abd", 1, "Ratio\\Metric\tThroughput (req/sec)\tavg. rt (ms)\tmed. rt (ms)\t95th rt (ms)\t99th rt (ms)\n0.1\t2000\t6.43\t6.89\t6.9\t7.2\n0.9\t9000\t5.23\t5.09\t6.2\t6.35\n"},
	{2, "abd", 3, "Ratio\\Metric\tThroughput (req/sec)\tavg. rt (ms)\tmed. rt (ms)\t95th rt (ms)\t99th rt (ms)\n0.1\t1800\t7.3\t7.29\t7.39\t7.5\n0.9\t8350\t6.17\t6.31\t6.23\t6.37\n"},
	{3, "abd", 5, "Ratio\\Metric\tThroughput (req/sec)\tavg. rt (ms)\tmed. rt (ms)\t95th rt (ms)\t99th rt (ms)\n0.1\t1820\t7.22\t7.05\t7\t7.15\n0.9\t8210\t6.67\t6.64\t6.53\t6.71\n"},
	{4, "blocking", 1, "Ratio\\Metric\tThroughput (req/sec)\tavg. rt (ms)\tmed. rt (ms)\t95th rt (ms)\t99th rt (ms)\n0.1\t2100\t6.13\t6.39\t6.74\t7.12\n0.9\t6740\t6.37\t6.43\t6.7\t6.98\n"},
	{5, "blocking", 3, "Ratio\\Metric\tThroughput (req/sec)\tavg. rt (ms)\tmed. rt (ms)\t95th rt (ms)\t99th rt (ms)\n0.1\t1600\t8.34\t8.45\t8.65\t9.03\n0.9\t6405\t7.37\t7.51\t7.68\t8.1\n"},
	{6, "blocking", 5, "Ratio\\Metric\tThroughput (req/sec)\tavg. rt (ms)\tmed. rt (ms)\t95th rt (ms)\t99th rt (ms)\n0.1\t1320\t9.53\t9.64\t9.88\t10.1\n0.9\t5920\t7.27\t7.52\t7.77\t8.05\n"},
}

// Metric names, shared by our cells and the seed's figures.
const (
	mThroughput = "throughput"
	mMean       = "mean_ms"
	mP50        = "p50_ms"
	mP95        = "p95_ms"
	mP99        = "p99_ms"
	mErrors     = "errors"
	// Where the time goes (claims' causes): mean GET and SET latency, and
	// CPU per operation of the cluster's nodes and of this process (the
	// bench clients, which run client-driven ABD's phases).
	mGetMs     = "get_ms"
	mSetMs     = "set_ms"
	mNodeCPU   = "node_cpu_ms_per_op"
	mClientCPU = "client_cpu_ms_per_op"
	// Derived (see Derive): relative to the same protocol and mix at N=1.
	mRelThroughput = "rel_throughput"
	mRelMean       = "rel_mean"
)

// seedColumns maps the seed's column headers to our metric names.
var seedColumns = []struct{ header, metric string }{
	{"Throughput (req/sec)", mThroughput},
	{"avg. rt (ms)", mMean},
	{"med. rt (ms)", mP50},
	{"95th rt (ms)", mP95},
	{"99th rt (ms)", mP99},
}

// seedFigures parses the six tables into figures keyed like our cells.
func seedFigures() (experiment.Figures, error) {
	figs := experiment.Figures{}
	for _, st := range seedTables {
		t, err := experiment.ParseSeedTable(st.text)
		if err != nil {
			return nil, fmt.Errorf("seed 001 table %d: %w", st.table, err)
		}
		for _, row := range t.Rows {
			for _, c := range seedColumns {
				v, err := t.Value(row.Label, c.header)
				if err != nil {
					return nil, fmt.Errorf("seed 001 table %d: %w", st.table, err)
				}
				// The seed's ABD is client-driven; its load is "uniform,
				// average 50 req/s" in words and a closed loop in numbers:
				// its figures stand beside both ABD columns and both loads.
				protos := []string{st.protocol}
				if st.protocol == "abd" {
					protos = append(protos, abdClient)
				}
				for _, p := range protos {
					for _, load := range []string{loadClosed, openLoad(50)} {
						figs.Set(cellKey(p, st.n, row.Label, load), c.metric, v)
					}
				}
			}
		}
	}
	return figs, nil
}

func cellKey(protocol string, n int, get, load string) string {
	return experiment.NewCell("protocol", protocol, "N", fmt.Sprint(n), "get", get, "load", load).Key
}
