// A child process for multi-process session tests. Opens a vault with a key file and,
// after reading a line on standard input (so every child starts at once), runs the
// requested operation and prints one line per result. Prints digests, never token values.
//
//     SessionProbe VAULT KEYFILE tokens N [--now MS]   N concurrent validAccessToken() calls
//     SessionProbe VAULT KEYFILE switch ID [--now MS]  make ID the active account
//     SessionProbe VAULT KEYFILE judge|activity|extend - [--now MS]   judge the active session
//         (raising a due idle warning), record activity on it, or extend it
//     SessionProbe VAULT KEYFILE race ROUNDS:SEED      ROUNDS random session transitions
//         (activity, extension, lock, unlock, rarely end) on the active account, the choices
//         drawn from SEED; prints `extended N` (extensions granted here) and `done`
//     (and the reliability suite's operations, see ReliabilityOperations.swift)
//
// `--now MS` fixes the wall clock (milliseconds since 1970) so the child judges deadlines
// at the same instant as the test that started it; without it the system clock is used.
// Results: `token <sha256 hex>`, `switched`, or `error <kind>`, the kind a stable name
// (`revoked`, `locked idle_timeout`, `expired absolute_timeout`, …), never a token.
import Foundation
import Logging
import Synchronization
import VaultCrypto
import VaultOAuth
import VaultSession
import VaultStore
import VaultTestSupport

func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// A stable, secret-free name for an error, for the parent test to compare.
func kind(of error: any Error) -> String {
    guard let error = error as? SessionError else { return "other \(type(of: error))" }
    switch error {
    case .noActiveAccount: return "noActiveAccount"
    case .notSignedIn: return "notSignedIn"
    case .locked(_, let reason): return "locked \(reason)"
    case .expired(_, let reason): return "expired \(reason)"
    case .revoked: return "revoked"
    case .refused: return "refused"
    case .clientMisconfigured(_, let code, _): return "clientMisconfigured \(code)"
    case .temporarilyUnavailable: return "temporarilyUnavailable"
    case .accountChanged: return "accountChanged"
    case .pinningFailed: return "pinningFailed"
    case .authenticationTooOld: return "authenticationTooOld"
    case .targetRefused(_, _, let code, _): return "targetRefused \(code)"
    case .vault(let error): return "vault \(error.code)"
    }
}

/// The `extend` operation's result line: `extended MS REMAINING` or `not extended …`.
/// (Built in a function: interpolated in a `switch` over an awaited value in the top-level
/// async code, the line's string storage was reported leaked by LeakSanitizer at exit.)
func extensionLine(_ result: ExtensionResult) -> String {
    guard case .extended(let deadline, let remaining) = result else { return "not extended \(result)" }
    return "extended \(Int64(deadline.timeIntervalSince1970 * 1000)) \(remaining)"
}

var arguments = Array(CommandLine.arguments.dropFirst())
var wallClock = WallClock.system
if let flag = arguments.firstIndex(of: "--now"), flag + 1 < arguments.count, let ms = Int64(arguments[flag + 1]) {
    let fixed = Date(timeIntervalSince1970: TimeInterval(ms) / 1000)
    wallClock = WallClock { fixed }
    arguments.removeSubrange(flag...(flag + 1))
}
// The reliability suite's operations (ReliabilityOperations.swift) take more arguments.
if let status = await runReliabilityOperation(arguments) { exit(status) }
guard arguments.count == 4 else {
    FileHandle.standardError.write(Data("usage: SessionProbe VAULT KEYFILE (tokens N | switch ID) [--now MS]\n".utf8))
    exit(2)
}
let vaultURL = URL(fileURLWithPath: arguments[0])
let keyFile = URL(fileURLWithPath: arguments[1])
let operation = arguments[2]
let argument = arguments[3]

do {
    let vault = try Vault.open(at: vaultURL, credential: .keyFile(keyFile), options: VaultOptions(clock: wallClock))
    let service = SessionService(vault: vault, oauth: OAuthClient(logger: Logger(label: "probe")), wallClock: wallClock)
    emit("ready")
    _ = readLine()
    switch operation {
    case "tokens":
        let count = Int(argument) ?? 1
        let results = await withTaskGroup(of: String.self) { group in
            for _ in 0..<count {
                group.addTask {
                    do {
                        let token = try await service.validAccessToken()
                        return "token \(Digest.hex(Digest.sha256(Array(token.value.utf8))))"
                    } catch {
                        return "error \(kind(of: error))"
                    }
                }
            }
            var lines: [String] = []
            for await line in group { lines.append(line) }
            return lines
        }
        results.forEach(emit)
    case "target":
        // N:URI — N callers at once, every other one asking for the account's own token.
        let parts = argument.split(separator: ":", maxSplits: 1).map(String.init)
        let count = Int(parts.first ?? "1") ?? 1
        let target = try TokenTarget(resources: [parts.last ?? ""])
        let results = await withTaskGroup(of: String.self) { group in
            for index in 0..<count {
                group.addTask {
                    do {
                        let token = try await service.validAccessToken(target: index.isMultiple(of: 2) ? target : .account)
                        return "\(token.target.isAccount ? "own" : "target") \(Digest.hex(Digest.sha256(Array(token.value.utf8))))"
                    } catch {
                        return "error \(kind(of: error))"
                    }
                }
            }
            var lines: [String] = []
            for await line in group { lines.append(line) }
            return lines
        }
        results.forEach(emit)
    case "switch":
        try await service.switchAccount(to: AccountID(rawValue: argument))
        emit("switched")
    case "judge":
        // The active account's session judged now: an idle warning, if due, goes to the log.
        emit("status \(try await service.status())")
    case "activity":
        try await service.recordActivity()
        emit("active")
    case "extend":
        emit(extensionLine(try await service.extendSession()))
    case "race":
        let parts = argument.split(separator: ":").compactMap { UInt64($0) }
        // Time moves 50 ms at every reading, so activity is written now and then (a fixed clock
        // would never let the stored last activity grow stale).
        let ticks = Mutex<Int64>(0)
        let start = wallClock.now()
        let moving = WallClock {
            start.addingTimeInterval(
                TimeInterval(
                    ticks.withLock {
                        $0 += 50
                        return $0
                    }) / 1000)
        }
        let extended = try await race(
            vault: vault, keyFile: keyFile, wallClock: moving,
            rounds: Int(parts.first ?? 100), seed: parts.last ?? 1)
        emit("extended \(extended)")
        emit("done")
    default:
        emit("error unknown operation \(operation)")
    }
    await service.stop()
    vault.close()
} catch {
    emit("error \(kind(of: error))")
    exit(1)
}

/// Random transitions on the active account's session through a service of its own, whose
/// extensions go through the server path (the in-flight marker): refusals are expected and
/// ignored; what the parent checks is the vault and its event log afterwards.
func race(vault: Vault, keyFile: URL, wallClock: WallClock, rounds: Int, seed: UInt64) async throws -> Int {
    let service = SessionService(
        vault: vault, oauth: OAuthClient(logger: Logger(label: "probe")), wallClock: wallClock,
        extensionHandler: { _ in
            await Task.yield()
            return true
        })
    var random = SplitMix64(seed: seed)
    var extended = 0
    // The end is drawn only in the last fifth of the rounds: drawn earlier, it would leave the
    // processes nothing to race over but refusals.
    let endsFrom = rounds * 4 / 5
    for round in 0..<rounds {
        let draw = random.next() % 10_000
        do {
            switch draw {
            case 0..<3500: try await service.recordActivity()
            case 3500..<6000: if case .extended = try await service.extendSession() { extended += 1 }
            case 6000..<8000: try await service.lock()
            case 8000..<9990: try await service.unlock(with: .keyFile(keyFile))
            case _ where round < endsFrom: try await service.unlock(with: .keyFile(keyFile))
            default: try await service.endSession(revoke: false)  // the timer race, not the provider
            }
        } catch {
            continue  // locked, expired, another process first: the race's ordinary refusals
        }
    }
    await service.stop()
    return extended
}
