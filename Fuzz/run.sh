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
             Sources/VaultOAuth/OAuthError.swift Sources/VaultOAuth/Redaction.swift) ;;
  Notification)
    sources=(Sources/VaultSession/Devices/HTTPDeviceNotificationAPI+Wire.swift
             Sources/VaultSession/Devices/RemoteNotification.swift Sources/VaultSession/Devices/RemoteDevice.swift
             Sources/VaultSession/Devices/DeviceAPIError.swift Sources/VaultOAuth/TransportError.swift
             Sources/VaultStore/NotificationRecord.swift Sources/VaultStore/DeviceRegistration.swift
             Sources/VaultStore/Account.swift) ;;
  *) echo "unknown fuzz target '$target' (SealedBlob, TokenResponse, Notification)" >&2; exit 64 ;;
esac

rm -rf "$work/src"
mkdir -p "$work/src" "$work/corpus" "$work/artifacts"
# One module: the files' imports of the package's own modules are dropped.
for file in "${sources[@]}"; do
  sed -E '/^(public |internal )?import (VaultStore|VaultOAuth|VaultCrypto|VaultSession|Logging)$/d' \
    "$root/$file" > "$work/src/$(basename "$file")"
done
swiftc -sanitize=fuzzer,address -parse-as-library -O -g \
  "$root/Fuzz/$target/main.swift" "$work/src/"*.swift -o "$work/fuzzer" 2> >(grep -v "ld.gold: warning" >&2)

"$work/fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" "$root/Fuzz/corpus/$target"
