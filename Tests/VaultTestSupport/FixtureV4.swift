import Foundation
import VaultStore

/// The records of the schema-4 fixture vault, `Tests/Fixtures/vault-v4.db`: everything in
/// ``FixtureV3`` plus what schema 4 added: a policy with no lifetime that counts only
/// interactive use, a session moved on by transitions (its version) with an extension in
/// flight, a count of refusals, and the event log (one entry with the server's words sealed,
/// one of the whole vault).
///
/// Frozen: this file describes a file that has landed.
public enum FixtureV4 {
    public static let fileName = "vault-v4.db"
    /// The fixture's passphrase: a published test value, protecting nothing.
    public static let passphrase = "fixture passphrase v4"

    public static let daveTokens = TokenSet(
        accessToken: "fixture-access-dave", refreshToken: "fixture-refresh-dave", idToken: nil, tokenType: "Bearer",
        accessTokenExpiresAt: FixtureV1.created.addingTimeInterval(3600), scopes: ["openid", "offline_access"])
    public static let davePolicy = SessionPolicy(
        idleTimeout: .seconds(600), warningBefore: .seconds(30), maxExtensions: 2, absoluteLifetime: nil,
        backgroundTimeout: nil, idleAction: .lock, activity: .interactive)
    public static let daveMarker = SessionRecord.ExtensionMarker(holder: "fixture/extension", deadline: FixtureV1.created.addingTimeInterval(45))
    public static let daveRefusal = "refused by the server (interaction_required)"
    public static let daveRefusalDetail = "the server's own words: interaction required"
    public static let revokedDetail = "the server's own words: grant revoked"

    /// Fills a new vault with the fixture's records (run by FixtureMaker with the schema-4 code).
    public static func populate(_ vault: Vault) throws {
        try FixtureV3.populate(vault)
        let active = try vault.accounts.activeID()
        let record = try vault.accounts.signIn(
            NewAccount(issuer: "https://id.fixture.test", subject: "dave", label: "Dave", client: FixtureV1.clientSettings(confidential: false)),
            tokens: daveTokens, policy: davePolicy)
        let dave = record.account.id
        // Two transitions: activity, then an extension request in flight.
        _ = try vault.sessions.transition(for: dave) { session, _ in session.lastActivityAt = FixtureV1.created.addingTimeInterval(10) }
        _ = try vault.sessions.transition(for: dave) { session, _ in session.extensionInFlight = daveMarker }
        for _ in 0..<2 {
            _ = try vault.leases.begin(
                for: dave, holder: "fixture", seenGeneration: record.generation, leaseDuration: .seconds(30),
                maximumBackoff: .seconds(3600 * 24 * 365 * 100))
            try vault.leases.fail(
                for: dave, holder: "fixture", failure: daveRefusal, detail: daveRefusalDetail, nextAttemptAt: nil,
                refusal: true)
        }
        let retention = EventRetention()
        try vault.events.append(
            kind: "token_refreshed", account: dave, data: ["generation": "1"], detail: nil,
            origin: "fixture", retention: retention)
        try vault.events.append(kind: "revoked", account: dave, data: [:], detail: revokedDetail, origin: "fixture", retention: retention)
        try vault.events.append(
            kind: "account_switched", account: nil, data: ["from": dave.rawValue], detail: nil,
            origin: "fixture", retention: retention)
        try vault.accounts.setActive(active)
    }

    /// Every difference between the vault and the fixture's records; empty when all survived.
    /// `laterAccounts`: accounts later fixtures added on top.
    public static func differences(in vault: Vault, laterAccounts: Int = 0, laterEventKinds: [String] = []) throws -> [String] {
        var problems = try FixtureV3.differences(in: vault, laterAccounts: 1 + laterAccounts)
        guard let dave = try vault.accounts.all().first(where: { $0.subject == "dave" }) else {
            return problems + ["dave missing"]
        }
        if try vault.tokens.current(for: dave.id)?.tokens != daveTokens { problems.append("dave: tokens differ") }
        if try vault.sessions.policy(for: dave.id) != davePolicy { problems.append("dave: policy differs") }
        guard let session = try vault.sessions.current(for: dave.id) else { return problems + ["dave: session missing"] }
        if session.version != 2 { problems.append("dave: session version \(session.version), not 2") }
        if session.extensionInFlight != daveMarker { problems.append("dave: extension marker differs") }
        if session.lastActivityAt != FixtureV1.created.addingTimeInterval(10) { problems.append("dave: last activity differs") }
        let state = try vault.leases.state(for: dave.id)
        if state.refusals != 2 || state.lastFailure != daveRefusal || state.lastFailureDetail != daveRefusalDetail {
            problems.append("dave: refresh state differs (refusals \(state.refusals))")
        }
        let events = try vault.events.list(after: 0)
        let kinds = events.map(\.kind)
        if kinds != ["token_refreshed", "revoked", "account_switched"] + laterEventKinds { problems.append("events differ: \(kinds)") }
        if events.contains(where: { !$0.authentic }) { problems.append("an event fails its check") }
        if events.count == 3 + laterEventKinds.count {
            if events[0].account != dave.id || events[0].data != ["generation": "1"] { problems.append("event 1 differs") }
            if events[1].detail != revokedDetail { problems.append("event 2: detail differs") }
            if events[2].account != nil || events[2].data != ["from": dave.id.rawValue] { problems.append("event 3 differs") }
        }
        return problems
    }
}
