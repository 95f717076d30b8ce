#!/bin/bash
# The measurements of issue 33 (docs/speed.md, "First contact" and "First and second runs at scale"), on fleets
# fanned out from today's committed runs (made as docs/speed.md says under "Commands", in the folder given,
# default /tmp/first: fleetq, 1,000 quick runs of 10 machines; fleet, 1,000 full runs of 4 machines with raw
# samples; fleet10k, 10,000 full runs of 20 machines without; fleet100k, if there, 100,000 of 50 machines
# without). Every "first" run starts from empty caches (the parsed runs and the results kept by their rows,
# one --cache folder), every "second" from the caches the first filled. From the repository root with its venv: `bash tools/measure_first_runs.sh [FOLDER]`; the log
# is FOLDER/first.log, the caches and reports go in FOLDER too.
set -u
cd "$(dirname "$0")/.."
t=${1:-/tmp/first}
log=$t/first.log
: > $log
say() { echo "== $(date +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): $*" | tee -a $log; }
pairs() { python tools/speed_pairs.py --pairs 5 "$@" 2>&1 | tee -a $log; }
timed() {  # label, command: one run's wall seconds, CPU seconds and peak memory
    /usr/bin/time -f "$1 %e s wall, %U+%S CPU-s, %M KB" bash -c "$2" > /dev/null 2>> $log
    tail -1 $log
}
say "first report of 1,000 quick runs (empty caches) vs pytest-benchmark compare"
pairs --before "rm -rf $t/rq $t/cq" "pytest-benchmark --storage $t/fleetq compare" \
    "python -m analysis report $t/fleetq --include-quick --out $t/rq --cache $t/cq"
say "first compare of the same, cache on (empty) vs --no-cache"
pairs --before "rm -rf $t/cc" "python -m analysis compare $t/fleetq --include-quick --no-cache" \
    "python -m analysis compare $t/fleetq --include-quick --cache $t/cc"
for fleet in fleetq fleet fleet10k fleet100k; do
    [ -d "$t/$fleet" ] || { say "$fleet: not there, skipped"; continue; }
    say "$fleet: compare and report, first and second"
    rm -rf "$t/c-$fleet" "$t/r-$fleet" "$t/cr-$fleet"
    timed "$fleet compare first" "python -m analysis compare $t/$fleet --include-quick --cache $t/c-$fleet"
    timed "$fleet compare second" "python -m analysis compare $t/$fleet --include-quick --cache $t/c-$fleet"
    timed "$fleet report first" "python -m analysis report $t/$fleet --include-quick --out $t/r-$fleet --cache $t/cr-$fleet"
    timed "$fleet report second" "python -m analysis report $t/$fleet --include-quick --out $t/r-$fleet --cache $t/cr-$fleet"
done
say "done"
