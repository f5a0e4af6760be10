#!/usr/bin/env bash
# scripts/page-instructions.sh [N] — instructions of one notification page of 50 (the first of
# 1,000 notifications), the vault's against its baseline (plaintext keyset page + the same 150
# decrypts + a keyed BLAKE2b row MAC per row over as many bytes as the vault's, issue 32 item 3),
# and the baseline before issue 32 (without the MACs), for the history. `make bench-profile`.
#
# Each side runs `VaultBench profile page|page-baseline|page-baseline-plain N` under callgrind
# (scripts/callgrind.sh), instructions counted only inside profiledStorePage/profiledBaselinePage
# (Benchmarks/Sources/VaultBench/Profile.swift), which each loop calls N times after one
# warm-up page: the count divided by N is one page, every statement prepared and key unwrapped.
# Counts are repeatable whatever else the machine runs. Prints a small table and writes
# .bench/page-instructions.json; the profiles stay in .bench/callgrind-page*.out for
#   callgrind_annotate --inclusive=yes .bench/callgrind-page.out | swift demangle --simplified | less
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
pages=${1:-50}
bin="$root/Benchmarks/.build/release/VaultBench"
[ -x "$bin" ] || { echo "build the harness first: swift build -c release --package-path Benchmarks" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind not found (apt-get install valgrind)" >&2; exit 1; }
symbol() {
    local found
    found=$(nm "$bin" | awk -v want="$1" '$2 ~ /^[Tt]$/ && index($3, want) == 1 { print $3; exit }')
    [ -n "$found" ] || { echo "no symbol $1* in $bin" >&2; exit 1; }
    echo "$found"
}
vault_symbol=$(symbol '$s10VaultBench17profiledStorePage')
baseline_symbol=$(symbol '$s10VaultBench20profiledBaselinePage')
mkdir -p "$root/.bench"
count() { # WHAT SYMBOL -> instructions per page
    local out="$root/.bench/callgrind-$1.out"
    CALLGRIND_OUT="$out" "$root/scripts/callgrind.sh" "$1" "$pages" "$2" >"$root/.bench/callgrind-$1.log" 2>&1 ||
        { cat "$root/.bench/callgrind-$1.log" >&2; exit 1; }
    awk -v n="$pages" '/^totals:/ { printf "%d\n", $2 / n; found = 1 } END { if (!found) exit 1 }' "$out"
}
vault=$(count page "$vault_symbol")
baseline=$(count page-baseline "$baseline_symbol")
plain=$(count page-baseline-plain "$baseline_symbol")
ratio=$(awk -v a="$vault" -v b="$baseline" 'BEGIN { printf "%.2f", a / b }')
old=$(awk -v a="$vault" -v b="$plain" 'BEGIN { printf "%.2f", a / b }')
met=$(awk -v r="$ratio" 'BEGIN { print (r <= 1.5) ? "yes" : "NO" }')
printf 'notification page of 50, first of 1000: instructions per page (callgrind, %d pages each)\n' "$pages"
printf '  %-62s %10d\n' "vault" "$vault"
printf '  %-62s %10d  ratio %s  target <= 1.5  met %s\n' "baseline: plaintext keyset page + 150 decrypts + row MACs" "$baseline" "$ratio" "$met"
printf '  %-62s %10d  ratio %s  (before issue 32, no target)\n' "old baseline: plaintext keyset page + 150 decrypts" "$plain" "$old"
cat > "$root/.bench/page-instructions.json" <<JSON
{"pages": $pages, "vault": $vault, "baseline": $baseline, "ratio": $ratio, "target": "<= 1.5", "met": $([ "$met" = yes ] && echo true || echo false), "baselineWithoutMACs": $plain}
JSON
