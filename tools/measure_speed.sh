#!/bin/bash
# The quiet measurements of issue 22 (docs/speed.md, "Issue 22's goals"), on the 21-case fleets made as
# docs/speed.md says under "Commands" (/tmp/fleet, /tmp/fleetq, /tmp/fleet20, /tmp/fleet50; the last one's
# parse cache /tmp/c50 filled, and its output kept, by one earlier
# `python -m analysis compare /tmp/fleet50 --cache /tmp/c50 > /tmp/c50.cold.out`).
# Run from the repository root with its venv: `bash tools/measure_speed.sh`; the log is /tmp/measure.log.
set -u
cd "$(dirname "$0")/.."
log=/tmp/measure.log
: > $log
say() { echo "== $(date +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg): $*" | tee -a $log; }
say "fill caches"
rm -rf /tmp/c1 /tmp/cq /tmp/c20 /tmp/c20r /tmp/rq /tmp/r20
python -m analysis compare /tmp/fleet --cache /tmp/c1 > /tmp/m.c1.out
rm -rf /tmp/rq; python -m analysis report /tmp/fleetq --include-quick --out /tmp/rq --cache /tmp/cq > /dev/null
say "compare 1000 runs (raw samples), cache warm, vs pytest-benchmark compare"
python tools/speed_pairs.py --pairs 5 "pytest-benchmark --storage /tmp/fleet compare" "python -m analysis compare /tmp/fleet --cache /tmp/c1" 2>&1 | tee -a $log
say "report 1000 quick runs, cache warm, vs pytest-benchmark compare"
python tools/speed_pairs.py --pairs 5 "pytest-benchmark --storage /tmp/fleetq compare" "rm -rf /tmp/rq; python -m analysis report /tmp/fleetq --include-quick --out /tmp/rq --cache /tmp/cq" 2>&1 | tee -a $log
say "compare 10000 runs: cold, then warm twice"
for k in cold warm1 warm2; do /usr/bin/time -f "$k %e s wall, %U+%S CPU-s, %M KB" python -m analysis compare /tmp/fleet20 --cache /tmp/c20 > /tmp/m.c20.$k.out 2>> $log; done
tail -3 $log
cmp /tmp/m.c20.cold.out /tmp/m.c20.warm2.out && say "10k compare cold and warm print the same"
say "report 10000 runs --no-samples: cold, then warm twice"
for k in cold warm1 warm2; do rm -rf /tmp/r20; /usr/bin/time -f "$k %e s wall, %U+%S CPU-s, %M KB" python -m analysis report /tmp/fleet20 --no-samples --out /tmp/r20 --cache /tmp/c20r > /dev/null 2>> $log; done
tail -3 $log
say "quick benchmark run, 4 times (pytest's count)"
for i in 1 2 3 4; do python -m pytest benchmarks --benchmark-only --quick -p no:cacheprovider -q 2>&1 | tail -1 | tee -a $log; done
say "compare 100000 runs, cache warm (parse cache filled before), twice"
for k in warm1 warm2 warm3; do /usr/bin/time -f "$k %e s wall, %U+%S CPU-s, %M KB" python -m analysis compare /tmp/fleet50 --cache /tmp/c50 > /tmp/m.c50.$k.out 2>> $log; done
tail -3 $log
cmp /tmp/m.c50.warm3.out /tmp/c50.cold.out && say "100k warm prints what the cold run printed"
say "done"
