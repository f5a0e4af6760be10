import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// Issue 13, part 1: every session transition is a compare-and-swap on the row's version, so
/// processes racing each other never undo a lock or an end and never exceed the extension limit.
@Suite("Session transitions racing across processes", .timeLimit(.minutes(TestTimeScale.minutes(3))))
struct SessionRaceTests {
    @Test("4 processes × 1,500 random transitions: versions unique, no lock or end undone, extensions counted once and within the limit")
    func fourProcessesRace() async throws {
        let base = ProcessInfo.processInfo.environment["RACE_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1...UInt64(UInt32.max))
        print("SessionRaceTests seed \(base) (run again with RACE_SEED=\(base))")
        try await SessionHarness.run { h in
            let policy = SessionPolicy(
                idleTimeout: .seconds(600), warningBefore: .seconds(30), maxExtensions: 5,
                absoluteLifetime: nil, backgroundTimeout: nil, idleAction: .lock)
            let alice = try await h.signIn("alice", policy: policy)
            let probes = try (0..<4).map { try h.probe("race", "1500:\(base &+ UInt64($0))") }
            for probe in probes {
                let ready = await probe.waitUntilReady()
                try #require(ready, "a probe did not start: \(probe.output.value)")
            }
            probes.forEach { $0.go() }
            var granted = 0
            for probe in probes {
                let lines = try await probe.results()
                #expect(lines.last == "done", "\(lines)")
                granted += lines.compactMap { $0.hasPrefix("extended ") ? Int($0.dropFirst(9)) : nil }.reduce(0, +)
            }

            let vault = try h.openAnotherVault()
            let session = try #require(try vault.sessions.current(for: alice))
            #expect(session.extensionsUsed == granted, "every extension granted is counted once, none lost")
            #expect(session.extensionsUsed <= policy.maxExtensions)

            // The transitions that announce themselves, in the order the vault applied them.
            let transitions = try vault.events.list(after: 0, account: alice, limit: 100_000).filter {
                $0.data["session"] == String(session.id) && $0.data["session_version"] != nil
            }
            #expect(transitions.allSatisfy { $0.authentic })
            let ordered = transitions.sorted { Int64($0.data["session_version"] ?? "") ?? 0 < Int64($1.data["session_version"] ?? "") ?? 0 }
            let versions = ordered.compactMap { $0.data["session_version"] }
            #expect(Set(versions).count == versions.count, "two transitions claimed one version")
            #expect(ordered.count >= 200, "the processes raced: \(ordered.count) transitions announced")
            var state = "active"
            var extensions = 0
            for event in ordered {
                let version = event.data["session_version"] ?? "?"
                switch (event.kind, event.data["state"]) {
                case ("state_changed", "locked"):
                    #expect(state == "active", "locked at version \(version) from \(state)")
                    state = "locked"
                case ("state_changed", "active"):
                    #expect(state == "locked", "became active at version \(version) from \(state): a lock or end was undone")
                    state = "active"
                case ("state_changed", "expired"):
                    #expect(state != "expired", "ended twice (version \(version))")
                    state = "expired"
                case ("extension_result", _):
                    #expect(state == "active", "extended at version \(version) while \(state)")
                    extensions += 1
                default:
                    Issue.record("unexpected transition \(event.kind) at version \(version)")
                }
            }
            #expect(extensions == session.extensionsUsed)
            #expect(state == session.state.rawValue, "the file agrees with the last transition")
        }
    }
}
