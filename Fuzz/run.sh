#!/usr/bin/env bash
# Fuzz/run.sh TARGET SECONDS — builds one libFuzzer target (swiftc -sanitize=fuzzer,address)
# from Fuzz/TARGET/main.swift and the library modules it parses with, then fuzzes it for
# SECONDS starting from the committed seeds in Fuzz/corpus/TARGET. Inputs it finds go to
# .fuzz/TARGET/corpus (not committed); a crash, hang (>10 s per input) or sanitizer report
# is written to .fuzz/TARGET/artifacts/ and fails the run.
#
# TARGET: SealedBlob | TokenResponse | Notification | AgentFrame
set -euo pipefail
export PATH=/opt/swift/usr/bin:$PATH

target=${1:?usage: Fuzz/run.sh SealedBlob|TokenResponse|Notification|AgentFrame SECONDS}
seconds=${2:?usage: Fuzz/run.sh TARGET SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/.fuzz/$target

# Each target is built from whole library modules, compiled as they are (no source rewritten),
# each as its own module under the fuzzer's instrumentation, then the target's main.swift.
# `modules` lists them in dependency order; `sources` lists loose files: the Notification
# target's parser still spans VaultSession, VaultStore and VaultOAuth, and AgentFrame needs one
# file of AgentWire (the rest reaches C modules a bare swiftc does not map).
modules=()
sources=()
case $target in
  SealedBlob)
    modules=(VaultSync VaultCrypto) ;;
  TokenResponse)
    modules=(OAuthWire) ;;
  Notification)
    sources=(Sources/VaultSession/Devices/HTTPDeviceNotificationAPI+Wire.swift
             Sources/VaultSession/Devices/RemoteNotification.swift Sources/VaultSession/Devices/RemoteDevice.swift
             Sources/VaultSession/Devices/DeviceAPIError.swift Sources/VaultOAuth/TransportError.swift
             Sources/VaultOAuth/EndpointRule.swift Sources/VaultSession/Devices/ServerInput.swift
             Sources/VaultStore/Notifications/NotificationRecord.swift Sources/VaultStore/Devices/DeviceRegistration.swift
             Sources/VaultStore/Accounts/AccountID.swift Sources/VaultStore/Date+Milliseconds.swift) ;;
  AgentFrame)
    # The agent's frame decoder, what every request of protocol 2 goes through first.
    sources=(Sources/AgentWire/WireMessage.swift) ;;
  *) echo "unknown fuzz target '$target' (SealedBlob, TokenResponse, Notification, AgentFrame)" >&2; exit 64 ;;
esac

rm -rf "$work/src" "$work/modules"
mkdir -p "$work/src" "$work/modules" "$work/corpus" "$work/artifacts"
flags=(-sanitize=fuzzer,address -parse-as-library -package-name fuzz -O -g -enable-testing
       -I "$work/modules" -I "$root/Sources/CSodium" -L "$work/modules")
quiet() { "$@" 2> >(grep -v "ld.gold: warning" >&2); }
for module in "${modules[@]}"; do
  quiet swiftc "${flags[@]}" -module-name "$module" -emit-module -emit-module-path "$work/modules/$module.swiftmodule" \
    -emit-library -static -o "$work/modules/lib$module.a" "$root/Sources/$module/"*.swift
done
# Dependents before what they use: GNU ld reads each static archive once, in order.
libraries=()
for module in "${modules[@]}"; do libraries=("-l$module" "${libraries[@]}"); done
# The Notification target's files, as one module: their imports of the package's own modules dropped.
for file in "${sources[@]}"; do
  sed -E '/^(public |internal )?import (VaultStore|VaultOAuth|VaultCrypto|VaultSession|Logging)$/d' \
    "$root/$file" > "$work/src/$(basename "$file")"
done
loose=()
if [ ${#sources[@]} -gt 0 ]; then loose=("$work/src/"*.swift); fi
quiet swiftc "${flags[@]}" "$root/Fuzz/$target/main.swift" "${loose[@]}" "${libraries[@]}" -lsodium -o "$work/fuzzer"

status=0
"$work/fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" "$root/Fuzz/corpus/$target" 2>&1 | tee "$work/log.txt" || status=$?

# Case 15's counts for `make stress` (STRESS_RESULTS names its JSON list; the .tsv beside it is
# what the table prints): inputs run, and crashes or sanitizer reports found.
if [ -n "${STRESS_RESULTS:-}" ]; then
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/log.txt" | grep -o '[0-9]*$' | tail -n 1)
  found=$(find "$work/artifacts" -type f | wc -l)
  python3 - "$STRESS_RESULTS" "15 fuzzing $target (${seconds} s)" "${runs:-0}" "$found" <<'PY'
import json, sys, os
path, case, runs, found = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = json.load(open(path)) if os.path.exists(path) else []
rows.append({"case": case, "tried": runs, "passed": runs - found, "lost": 0, "leaked": found})
json.dump(rows, open(path, "w"), indent=2, sort_keys=True)
with open(os.path.splitext(path)[0] + ".tsv", "w") as table:
    table.writelines(f"{r['case']}\t{r['tried']}\t{r['passed']}\t{r['lost']}\t{r['leaked']}\n" for r in rows)
PY
fi
exit "$status"
