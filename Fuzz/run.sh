#!/usr/bin/env bash
# Fuzz/run.sh TARGET SECONDS — builds one libFuzzer target (swiftc -sanitize=fuzzer,address)
# from Fuzz/TARGET/main.swift and the library sources it parses with, then fuzzes it for
# SECONDS starting from the committed seeds in Fuzz/corpus/TARGET. Inputs it finds go to
# .fuzz/TARGET/corpus (not committed); a crash, hang (>10 s per input) or sanitizer report
# is written to .fuzz/TARGET/artifacts/ and fails the run.
#
# TARGET: SealedBlob | TokenResponse | Notification
set -euo pipefail
export PATH=/opt/swift/usr/bin:$PATH

target=${1:?usage: Fuzz/run.sh SealedBlob|TokenResponse|Notification SECONDS}
seconds=${2:?usage: Fuzz/run.sh TARGET SECONDS}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/.fuzz/$target

case $target in
  SealedBlob)
    sources=(Sources/VaultCrypto/SealedBlob.swift Sources/VaultCrypto/CryptoError.swift) ;;
  TokenResponse)
    sources=(Sources/VaultOAuth/TokenResponse.swift Sources/VaultOAuth/JSONFields.swift
             Sources/VaultOAuth/OAuthError.swift Sources/VaultOAuth/Redaction.swift Sources/VaultOAuth/FormURLEncoding.swift) ;;
  Notification)
    sources=(Sources/VaultSession/Devices/HTTPDeviceNotificationAPI+Wire.swift
             Sources/VaultSession/Devices/RemoteNotification.swift Sources/VaultSession/Devices/RemoteDevice.swift
             Sources/VaultSession/Devices/DeviceAPIError.swift Sources/VaultOAuth/TransportError.swift
             Sources/VaultOAuth/EndpointRule.swift Sources/VaultSession/Devices/ServerInput.swift
             Sources/VaultStore/Notifications/NotificationRecord.swift Sources/VaultStore/Devices/DeviceRegistration.swift
             Sources/VaultStore/Accounts/AccountID.swift Sources/VaultStore/Date+Milliseconds.swift) ;;
  *) echo "unknown fuzz target '$target' (SealedBlob, TokenResponse, Notification)" >&2; exit 64 ;;
esac

rm -rf "$work/src"
mkdir -p "$work/src" "$work/corpus" "$work/artifacts"
# One module: the files' imports of the package's own modules are dropped.
for file in "${sources[@]}"; do
  sed -E '/^(public |internal )?import (VaultStore|VaultOAuth|VaultCrypto|VaultSession|Logging)$/d' \
    "$root/$file" > "$work/src/$(basename "$file")"
done
swiftc -sanitize=fuzzer,address -parse-as-library -package-name fuzz -O -g \
  "$root/Fuzz/$target/main.swift" "$work/src/"*.swift -o "$work/fuzzer" 2> >(grep -v "ld.gold: warning" >&2)

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
