package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Metric families the report is built from.
const (
	metricCPU       = "process_cpu_seconds_total"
	metricRSS       = "process_resident_memory_bytes"
	metricRaftBytes = "drover_raft_entry_bytes_proposed_total"
)

// scrapedMetrics are the metrics the report uses, from one server.
type scrapedMetrics struct {
	CPUSeconds float64
	RSSBytes   float64
	RaftBytes  float64
}

// scrape reads one server's metrics endpoint.
func scrape(ctx context.Context, client *http.Client, url string) (scrapedMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %s", url, resp.Status)
	}
	sums, err := sumFamilies(resp.Body, metricCPU, metricRSS, metricRaftBytes)
	if err != nil {
		return scrapedMetrics{}, fmt.Errorf("metrics %s: %w", url, err)
	}
	return scrapedMetrics{CPUSeconds: sums[metricCPU], RSSBytes: sums[metricRSS], RaftBytes: sums[metricRaftBytes]}, nil
}

// sumFamilies reads the Prometheus text format and returns, for each
// wanted metric name, the sum of its samples over all label sets.
func sumFamilies(r io.Reader, names ...string) (map[string]float64, error) {
	wanted := make(map[string]bool, len(names))
	for _, n := range names {
		wanted[n] = true
	}
	sums := make(map[string]float64, len(names))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := parseSample(line)
		if !ok || !wanted[name] {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("sample %q: %w", line, err)
		}
		sums[name] += v
	}
	return sums, sc.Err()
}

// parseSample splits `name{labels} value [timestamp]` into the name and
// the value.
func parseSample(line string) (name, value string, ok bool) {
	rest := line
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", "", false
		}
		name, rest = line[:i], line[j+1:]
	} else {
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			return "", "", false
		}
		name, rest = line[:i], line[i:]
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", "", false
	}
	return name, fields[0], true
}
