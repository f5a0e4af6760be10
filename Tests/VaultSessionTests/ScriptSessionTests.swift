import Foundation
import Testing
import VaultSession
import VaultStore
import VaultTestSupport

/// Issue 13, part 3: a token served counts as activity unless the policy says interactive only.
@Suite("A session model scripts can live with", .timeLimit(.minutes(TestTimeScale.minutes(1))))
struct ScriptSessionTests {
    @Test(
        "a script asking for a token every second (a new process each time), 5 s idle timeout: a minute of work; interactive-only locks at 5 s",
        arguments: [SessionPolicy.Activity.any, .interactive])
    func scriptKeepsItsSession(_ activity: SessionPolicy.Activity) async throws {
        try await SessionHarness.run { h in
            let policy = SessionPolicy(
                idleTimeout: .seconds(5), warningBefore: .seconds(1), maxExtensions: 0, absoluteLifetime: nil,
                backgroundTimeout: nil, idleAction: .lock, activity: activity)
            let alice = try await h.signIn("alice", policy: policy)
            let other = try h.openAnotherVault()
            var lockedAt: Int?
            for second in 1...60 {
                await h.time.advance(by: .seconds(1))
                // Each call is a fresh service, as each `vault token` is a fresh process.
                let script = h.makeService(on: other)
                do {
                    _ = try await script.validAccessToken()
                } catch SessionError.locked(alice, .idleTimeout) {
                    lockedAt = lockedAt ?? second
                }
            }
            switch activity {
            case .any: #expect(lockedAt == nil, "locked at \(lockedAt ?? 0) s although the script kept asking")
            case .interactive: #expect(lockedAt == 5, "with interactive use only, the script's calls are not activity")
            }
        }
    }
}
