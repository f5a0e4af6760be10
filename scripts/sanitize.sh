#!/usr/bin/env bash
# scripts/sanitize.sh [thread] [address] — the whole test suite under each sanitizer (both when
# none is named), in the two steps `make test` uses: everything but VaultReliabilityTests, then
# VaultReliabilityTests in its own test process.
#
# Each sanitizer builds into its own scratch path (.build-tsan, .build-asan), never .build.
# Every sanitized process — the test runner and the SessionProbe and vault children it starts —
# writes its reports to a file under .sanitize/<sanitizer>/ (log_path), so a report from a child
# whose output a test captured is not lost. Exits non-zero when a build or a test step fails,
# a step runs past SANITIZE_STEP_TIMEOUT seconds (default 2400; the step's whole process group,
# test runner included, is then killed), or any process left a sanitizer report.
#
# TSan runs with scripts/tsan-suppressions.txt (one documented dependency false positive),
# LeakSanitizer with scripts/lsan-suppressions.txt (third-party process-lifetime allocations).
# Logs: .sanitize/<sanitizer>/{build,main,reliability}.log
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export PATH="/opt/swift/usr/bin:$PATH"
step_timeout=${SANITIZE_STEP_TIMEOUT:-2400}
sanitizers=("$@")
[ ${#sanitizers[@]} -eq 0 ] && sanitizers=(thread address)

# Runs "$@" in a session of its own; on timeout kills every process of that session (swift-test
# does not pass a signal on to the test runner it started, which would otherwise keep running).
run_bounded() {
    local log=$1; shift
    local start pid rc
    start=$(date +%s)
    setsid "$@" >"$log" 2>&1 &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        if (( $(date +%s) - start >= step_timeout )); then
            echo "TIMEOUT: still running after ${step_timeout}s" >>"$log"
            # By session: swift-test starts the test runner in a process group of its own.
            pkill -TERM -s "$pid" 2>/dev/null; sleep 5; pkill -KILL -s "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            echo "  timed out after ${step_timeout}s"
            return 124
        fi
        sleep 2
    done
    wait "$pid"; rc=$?
    echo "  exit $rc after $(( $(date +%s) - start ))s"
    return "$rc"
}

# At most this many tests at once (Swift Testing's SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH;
# unset, every test of the run starts at once). Under a sanitizer on 2 cores, hundreds of tests
# starting together, each instrumented several times over and many with instrumented `vault`
# children, left loopback servers unanswered for over a minute and failed whichever tests'
# bounds ran out first (a different set each run, depending on the machine's other load). The
# sanitizers look for races and leaks inside each test; 8 at a time still runs tests side by side.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=${SANITIZE_PARALLEL_WIDTH:-8}

failed=0
for sanitizer in "${sanitizers[@]}"; do
    # TEST_TIME_SCALE stretches tests' real-time bounds (transport timeouts) to the sanitizer's
    # slowdown; tests that read it say so.
    case "$sanitizer" in
        thread) scratch=.build-tsan; export TEST_TIME_SCALE=${TEST_TIME_SCALE_THREAD:-6} ;;
        address) scratch=.build-asan; export TEST_TIME_SCALE=${TEST_TIME_SCALE_ADDRESS:-3} ;;
        *) echo "unknown sanitizer: $sanitizer (thread or address)"; exit 2 ;;
    esac
    out="$root/.sanitize/$sanitizer"
    rm -rf "$out" && mkdir -p "$out/reports"
    export TSAN_OPTIONS="suppressions=$root/scripts/tsan-suppressions.txt log_path=$out/reports/tsan second_deadlock_stack=1"
    export ASAN_OPTIONS="log_path=$out/reports/asan"
    export LSAN_OPTIONS="suppressions=$root/scripts/lsan-suppressions.txt"

    echo "== $sanitizer: build"
    if ! run_bounded "$out/build.log" swift build --build-tests --sanitize="$sanitizer" --scratch-path "$scratch"; then
        grep -E "error:" "$out/build.log" | sort -u | head -20
        failed=1; continue
    fi
    # As `make test`: a bounded number of tests at once (see TEST_WIDTH in the Makefile).
    export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH=${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-48}
    common=(swift test --skip-build --sanitize="$sanitizer" --scratch-path "$scratch")
    echo "== $sanitizer: tests (all but VaultReliabilityTests)"
    run_bounded "$out/main.log" "${common[@]}" --skip VaultReliabilityTests || failed=1
    grep -E "^(✔|✘) Test run with|Executed .* tests" "$out/main.log" | tail -2
    echo "== $sanitizer: VaultReliabilityTests"
    run_bounded "$out/reliability.log" "${common[@]}" --filter VaultReliabilityTests || failed=1
    grep -E "^(✔|✘) Test run with|Executed .* tests" "$out/reliability.log" | tail -2

    # A report file that only lists the suppressions used (LeakSanitizer writes one whenever a
    # suppression matched) is not a finding.
    reports=$(grep -lE "WARNING: ThreadSanitizer|ERROR: |SUMMARY: " -r "$out/reports" 2>/dev/null | sort)
    inline=$(grep -lE "WARNING: ThreadSanitizer|ERROR: (AddressSanitizer|LeakSanitizer)|SUMMARY: [A-Za-z]+Sanitizer" "$out/main.log" "$out/reliability.log" 2>/dev/null)
    if [ -n "$reports" ] || [ -n "$inline" ]; then
        echo "== $sanitizer: sanitizer reports"
        for file in $reports $inline; do
            echo "-- $file"; grep -E "SUMMARY: " "$file" | sort | uniq -c
        done
        failed=1
    else
        echo "== $sanitizer: no sanitizer report"
    fi

    # Case 16's counts for `make stress` when STRESS_RESULTS names its JSON list: tests run under
    # this sanitizer, and the processes that left a report.
    if [ -n "${STRESS_RESULTS:-}" ]; then
        tests=$(grep -hoE "Test run with [0-9]+ tests" "$out/main.log" "$out/reliability.log" | grep -oE "[0-9]+" | awk '{ s += $1 } END { print s + 0 }')
        found=$(printf '%s\n' $reports $inline | grep -c . || true)
        python3 - "$STRESS_RESULTS" "16 the whole suite under $sanitizer sanitizer" "${tests:-0}" "$found" <<'PY'
import json, sys, os
path, case, tests, found = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = json.load(open(path)) if os.path.exists(path) else []
rows.append({"case": case, "tried": tests, "passed": tests if found == 0 else 0, "lost": 0, "leaked": found})
json.dump(rows, open(path, "w"), indent=2, sort_keys=True)
with open(os.path.splitext(path)[0] + ".tsv", "w") as table:
    table.writelines(f"{r['case']}\t{r['tried']}\t{r['passed']}\t{r['lost']}\t{r['leaked']}\n" for r in rows)
PY
    fi
done
exit "$failed"
