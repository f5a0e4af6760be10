import Foundation
import GRDB

/// What ``LeaseStore/completeTarget(for:holder:target:tokens:recording:)`` stored.
package struct TargetRefreshRecord: Sendable {
    /// The token for the target, as stored.
    package var token: StoredAccessToken
    /// The account's new token generation when the server rotated the refresh token; nil when it did not.
    package var rotatedGeneration: Int64?
}

// MARK: - Refreshes for other targets

extension LeaseStore {
    /// Stores a token obtained for `target` from the account's refresh token and releases the
    /// caller's lease, atomically, if the account's tokens are still generation `generation`, the
    /// ones it refreshed from. As with ``complete(for:holder:from:tokens:recording:)``, a lease
    /// lost meanwhile does not discard the result. Returns nil when the result was discarded (the
    /// account was removed, or its tokens changed since `generation`).
    ///
    /// A refresh token in `tokens` (the server rotated it) replaces the account's own: RFC 6749
    /// §6 issues it with the scope of the one presented, and the one presented may no longer
    /// work. The account's own access and ID tokens stay; only the target's token is replaced.
    package func completeTarget(
        for account: AccountID, holder: String, from generation: Int64, target: TokenTarget, tokens: TokenSet,
        recording: EventRecording<TargetRefreshRecord?>? = nil
    ) throws -> TargetRefreshRecord? {
        try write("storing a token for a target", recording: recording) { db in
            guard let current = try core.tokens.current(for: account, db), current.generation == generation else { return nil }
            var rotated: Int64?
            if let refreshToken = tokens.refreshToken, refreshToken != current.tokens.refreshToken {
                var kept = current.tokens
                kept.refreshToken = refreshToken
                rotated = try core.tokens.store(kept, for: account, replacing: generation, db)
            }
            let token = try core.tokens.store(tokens, for: account, target: target, db)
            try releaseLease(for: account, holder: holder, succeeded: true, db)
            return TargetRefreshRecord(token: token, rotatedGeneration: rotated)
        }
    }

    /// Releases the caller's lease without recording a failure or touching the back-off: the
    /// refresh was not needed after all (another process stored the token meanwhile), or the
    /// server refused the target, not the grant.
    package func release(for account: AccountID, holder: String) throws {
        try write("releasing the refresh lease") { db in try releaseLease(for: account, holder: holder, succeeded: false, db) }
    }

    /// Clears the lease if `holder` holds it. After a success also the failures and back-off,
    /// and then when nobody holds the lease too (`holder`'s lapsed and another caller failed
    /// meanwhile); a lease another caller holds now stays with it.
    func releaseLease(for account: AccountID, holder: String, succeeded: Bool, _ db: Database) throws {
        let holders = succeeded ? "(lease_holder = ? OR lease_holder IS NULL)" : "lease_holder = ?"
        try integrity.rewrite(.refreshState, where: "account_id = ? AND \(holders)", [account.rawValue, holder], db) {
            try db.execute(
                sql: """
                    UPDATE refresh_state SET lease_holder = NULL, lease_generation = NULL, lease_acquired_at = NULL,
                        lease_expires_at = NULL, lease_process = NULL\(succeeded ? ", failures = 0, next_attempt_at = NULL, refusals = NULL" : "")
                    WHERE account_id = ? AND \(holders)
                    """,
                arguments: [account.rawValue, holder])
        }
    }
}
