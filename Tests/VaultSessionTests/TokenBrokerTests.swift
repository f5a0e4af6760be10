import Foundation
import Synchronization
import Testing

@testable import VaultSession
@testable import VaultStore

/// ``TokenBroker``: which token work callers share. A caller asking what another is being
/// served joins it; once it finished, the next caller starts anew; a refresh is one per account.
@Suite("Token broker", .timeLimit(.minutes(1)))
struct TokenBrokerTests {
    private let alice = AccountID(rawValue: "alice")
    private let bob = AccountID(rawValue: "bob")

    private func token(_ value: String, _ account: AccountID) -> AccessToken {
        AccessToken(
            StoredAccessToken(account: account, generation: 1, accessToken: value, tokenType: "Bearer", expiresAt: nil, scopes: []))
    }

    @Test("callers asking the same while it is worked out join it; each kind of request has its own")
    func requestsAreShared() async throws {
        var broker = TokenBroker()
        let (first, firstJoined) = broker.serving(.active)
        let (second, secondJoined) = broker.serving(.active)
        let (named, namedJoined) = broker.serving(.account(alice))
        #expect(!firstJoined && secondJoined && !namedJoined)
        #expect(first === second && first !== named)

        let answer = token("t1", alice)
        #expect(try await first.lead { answer } == answer)
        #expect(try await second.value() == answer, "the joined caller gets the leader's answer")
        broker.release(first, for: .active)
        let (next, nextJoined) = broker.serving(.active)
        #expect(!nextJoined && next !== first, "finished work is never joined: the next caller reads anew")
    }

    @Test("a caller back from older work does not unregister newer work")
    func releaseKeepsNewerWork() async throws {
        var broker = TokenBroker()
        let (old, _) = broker.serving(.active)
        _ = try await old.lead { token("old", alice) }
        let (newer, joined) = broker.serving(.active)
        #expect(!joined)
        broker.release(old, for: .active)
        let (again, joinedAgain) = broker.serving(.active)
        #expect(joinedAgain && again === newer)
    }

    @Test("one refresh per account: joined while running, replaced once finished, cancellable")
    func refreshes() async throws {
        var broker = TokenBroker()
        let started = Mutex(0)
        let stored = StoredTokens(
            account: alice, generation: 2, tokens: TokenSet(accessToken: "new", tokenType: "Bearer", scopes: []), updatedAt: Date())
        // Each refresh waits for its own gate (one reader per stream).
        let aliceGate = AsyncStream.makeStream(of: Void.self)
        let bobGate = AsyncStream.makeStream(of: Void.self)
        func start(_ gate: AsyncStream<Void>) -> () -> Coalesced<StoredTokens> {
            {
                started.withLock { $0 += 1 }
                return Coalesced<StoredTokens>(whenAbandoned: .finish) {
                    for await _ in gate { break }  // ends early when cancelled
                    try Task.checkCancellation()
                    return stored
                }
            }
        }
        let first = broker.refresh(of: alice, starting: start(aliceGate.stream))
        let second = broker.refresh(of: alice, starting: start(aliceGate.stream))
        let other = broker.refresh(of: bob, starting: start(bobGate.stream))
        #expect(started.withLock { $0 } == 2 && first === second && first !== other)
        #expect(broker.runningRefreshes.count == 2)

        broker.cancelRefresh(of: bob)
        await #expect(throws: CancellationError.self) { try await other.value() }

        aliceGate.continuation.yield()
        #expect(try await first.value() == stored)
        broker.release(first, of: alice)
        _ = broker.refresh(
            of: alice,
            starting: {
                started.withLock { $0 += 1 }
                return Coalesced(whenAbandoned: .finish) { stored }
            })
        #expect(started.withLock { $0 } == 3, "a finished refresh is let go: the next caller starts another")
    }

    @Test("token lifetimes are remembered per account")
    func lifetimes() {
        var broker = TokenBroker()
        broker.observeLifetime(300, of: alice)
        #expect(broker.lifetime(of: alice) == 300)
        #expect(broker.lifetime(of: bob) == nil)
    }
}
