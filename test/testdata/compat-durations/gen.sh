#!/bin/sh
# gen.sh made the fixtures of TestCompatDurations (test/compat_durations_test.go):
# data and a backup written by the release before durations became
# google.protobuf.Duration (commit 19df801, where they were int64
# nanoseconds). It is kept to show how they were made; it must be run with a
# binary of that release, never of a later one:
#
#   git worktree add /tmp/drover-19df801 19df801
#   (cd /tmp/drover-19df801 && go build -o /tmp/drover-prev ./cmd/drover)
#   test/testdata/compat-durations/gen.sh /tmp/drover-prev
#
# It starts a single bootstrapped server, registers flaky.json (a reschedule
# policy, both disconnect settings) and rollout.json (an update block with a
# progress deadline, so a deployment), runs simulated agents on which every
# allocation fails, so that flaky's allocation is rescheduled and its
# replacement carries a reschedule event with a delay, then saves a backup
# (backup.snap), stops the server and tars its data dir (datadir.tar.gz).
# The server never reaches its snapshot threshold, so everything is in the
# raft log: restarting on the data dir replays it through the FSM's entry
# decoding, and restoring the backup goes through the snapshot reader.
set -eu
bin=${1:?usage: gen.sh PATH-TO-PREVIOUS-DROVER-BINARY}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill $agent $server 2>/dev/null || true; rm -rf "$work"' EXIT
addr=127.0.0.1:14650
export DROVER_ADDR=$addr

"$bin" server -bootstrap -data-dir "$work/data" -server-id s1 \
	-rpc-addr $addr -raft-addr 127.0.0.1:14651 >"$work/server.log" 2>&1 &
server=$!
i=0
until "$bin" server members >/dev/null 2>&1; do
	i=$((i + 1)); [ $i -lt 100 ] || { cat "$work/server.log"; exit 1; }
	sleep 0.2
done
"$bin" agent -sim-nodes 2 -failure-rate 1 -start-delay 200ms >"$work/agent.log" 2>&1 &
agent=$!
sleep 2
"$bin" job run -detach "$here/flaky.json"
"$bin" job run -detach "$here/rollout.json"
# The first allocation fails and is rescheduled after the policy's 2s delay
# (plus the scheduler's own wait); its replacement records the reschedule.
# ("reschedule_tracker" alone would match the null of the first one.)
i=0
until "$bin" job status -json flaky | grep -q '"prev_alloc_id"'; do
	i=$((i + 1)); [ $i -lt 150 ] || { "$bin" job status -json flaky; exit 1; }
	sleep 0.2
done
sleep 1
kill $agent; wait $agent 2>/dev/null || true
"$bin" operator snapshot save "$work/backup.snap"
kill $server; wait $server 2>/dev/null || true
cp "$work/backup.snap" "$here/backup.snap"
# Without the server id's info: the data dir is all a restart needs.
tar -C "$work" -czf "$here/datadir.tar.gz" data
ls -l "$here/backup.snap" "$here/datadir.tar.gz"
