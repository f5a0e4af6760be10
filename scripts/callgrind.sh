#!/usr/bin/env bash
# scripts/callgrind.sh WHAT N [FUNCTION] — one `VaultBench profile WHAT N` loop under callgrind,
# instructions counted only inside FUNCTION (a mangled Swift name) when given, e.g. the page:
#
#   scripts/callgrind.sh page 30 '$s10VaultStore0A0C13notificationsyAA16NotificationPageVAA0D5QueryVKF'
#   callgrind_annotate --inclusive=yes .bench/callgrind.out | less
#
# CALLGRIND_OUT=FILE writes the profile there instead of .bench/callgrind.out.
#
# Two things stopped valgrind 3.19 on this binary before (BENCHMARKS.md said callgrind "aborts on
# every run that opens a vault"), and this works around both:
# - the async main parks the main thread in libdispatch's sigsuspend() with a mask in read-only
#   memory, which valgrind writes to (SIGSEGV inside valgrind): a preloaded sigsuspend passes a copy;
# - valgrind cannot read the release build's DWARF 5: a copy stripped of debug info (symbols stay).
# Needs Benchmarks/.build/release/VaultBench (make bench, or swift build -c release --package-path Benchmarks).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:?usage: scripts/callgrind.sh WHAT N [FUNCTION]}
count=${2:?usage: scripts/callgrind.sh WHAT N [FUNCTION]}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/shim.c" <<'C'
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
int sigsuspend(const sigset_t *mask) { sigset_t copy = *mask; return (int)syscall(SYS_rt_sigsuspend, &copy, 8); }
C
cc -shared -fPIC -O2 -o "$work/shim.so" "$work/shim.c"
cp "$root/Benchmarks/.build/release/VaultBench" "$work/VaultBench"
strip --strip-debug "$work/VaultBench"
out=${CALLGRIND_OUT:-$root/.bench/callgrind.out}
mkdir -p "$(dirname "$out")"
toggle=()
[ $# -ge 3 ] && toggle=(--toggle-collect="$3")
SWIFT_BACKTRACE=enable=no LD_PRELOAD="$work/shim.so" valgrind --tool=callgrind "${toggle[@]}" \
    --callgrind-out-file="$out" "$work/VaultBench" profile "$what" "$count"
echo "wrote $out"
