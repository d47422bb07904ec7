#!/bin/sh
# pgo-profile.sh BIN OUT: collect the CPU profile the Go compiler uses to
# optimise drover (profile-guided optimisation, cmd/drover/default.pgo).
#
# Three servers of BIN on loopback run the c1m scenario of `drover bench`
# (5,000 simulated nodes, 100 jobs of 1,000 allocations); 8 s after it
# starts, each server's CPU is profiled for 15 s, and the three profiles
# are merged into OUT. `make pgo` runs it; see docs/benchmarks.md.
# PGO_PORT (default 47100) is the first of the nine loopback ports used;
# GO (default go) is the Go command that merges the profiles.
set -eu
bin=$1
out=$2
port=${PGO_PORT:-47100}
dir=$(mktemp -d)
pids=""
cleanup() {
	[ -z "$pids" ] || kill $pids 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM

rpc() { echo "127.0.0.1:$((port + 3 * ($1 - 1)))"; }
raft() { echo "127.0.0.1:$((port + 3 * ($1 - 1) + 1))"; }
http() { echo "127.0.0.1:$((port + 3 * ($1 - 1) + 2))"; }
join="$(rpc 1),$(rpc 2),$(rpc 3)"
for i in 1 2 3; do
	"$bin" server -data-dir "$dir/s$i" -rpc-addr "$(rpc $i)" -raft-addr "$(raft $i)" \
		-http-addr "$(http $i)" -enable-pprof -bootstrap-expect 3 -join "$join" \
		>"$dir/s$i.log" 2>&1 &
	pids="$pids $!"
done

# Wait for the three servers to answer (at most a minute).
ready=0
for _ in $(seq 1 300); do
	if curl -sf "http://$(http 1)/metrics" >/dev/null && curl -sf "http://$(http 2)/metrics" >/dev/null &&
		curl -sf "http://$(http 3)/metrics" >/dev/null; then
		ready=1
		break
	fi
	sleep 0.2
done
if [ $ready = 0 ]; then
	echo "pgo-profile: the servers did not start; their logs:" >&2
	cat "$dir"/s*.log >&2
	exit 1
fi

metrics="http://$(http 1)/metrics,http://$(http 2)/metrics,http://$(http 3)/metrics"
"$bin" bench -scenario c1m -address "$join" -metrics "$metrics" >"$dir/bench.out" 2>"$dir/bench.err" &
bench=$!
sleep 8
profs=""
for i in 1 2 3; do
	curl -sf -o "$dir/s$i.prof" "http://$(http $i)/debug/pprof/profile?seconds=15" &
	profs="$profs $!"
done
for p in $profs; do
	wait "$p" || { echo "pgo-profile: a server's profile failed" >&2; exit 1; }
done
if ! wait $bench; then
	echo "pgo-profile: drover bench failed:" >&2
	cat "$dir/bench.err" >&2
	exit 1
fi
"${GO:-go}" tool pprof -proto "$dir/s1.prof" "$dir/s2.prof" "$dir/s3.prof" >"$out"
echo "pgo-profile: wrote $out from the c1m run:"
cat "$dir/bench.out"
