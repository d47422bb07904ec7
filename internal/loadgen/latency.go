package loadgen

import "github.com/droverhq/drover/internal/simagent"

// latencyOf summarises a fleet latency histogram; zero for nil.
func latencyOf(l *simagent.Latency) Latency {
	if l == nil || l.Count() == 0 {
		return Latency{}
	}
	return Latency{
		Count:      l.Count(),
		P50Seconds: l.Quantile(0.50).Seconds(),
		P99Seconds: l.Quantile(0.99).Seconds(),
	}
}

// fleetLatencies summarises the UpdateAlloc and GetAllocs latencies of a
// fleet's stats.
func fleetLatencies(st simagent.Stats) (update, get Latency) {
	return latencyOf(st.UpdateAllocLatency), latencyOf(st.GetAllocsLatency)
}

// latenciesBetween summarises the latencies observed between two stats of
// one fleet.
func latenciesBetween(before, after simagent.Stats) (update, get Latency) {
	return latencyOf(after.UpdateAllocLatency.Since(before.UpdateAllocLatency)),
		latencyOf(after.GetAllocsLatency.Since(before.GetAllocsLatency))
}
