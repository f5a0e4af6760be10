import Foundation
import VaultCrypto
import VaultStore

/// A vault's recipient key as text, safe to paste: `cvr1:` and base64url (no padding) of the
/// X25519 public key and a four-byte checksum, so a mistyped key is refused rather than used to
/// seal a session nobody can open.
///
/// ```swift
/// let recipient = try SessionRecipient(parsing: "cvr1:…")
/// print(recipient.fingerprint)
/// ```
public struct SessionRecipient: Sendable, Hashable, CustomStringConvertible {
    public static let prefix = "cvr1:"
    public let publicKey: [UInt8]

    public init(publicKey: [UInt8]) {
        self.publicKey = publicKey
    }

    public init(parsing text: String) throws {
        let trimmed = SessionArmor.trimmed(text)
        guard trimmed.hasPrefix(Self.prefix), let bytes = Base64URL.decodeCanonical(String(trimmed.dropFirst(Self.prefix.count))),
            bytes.count == RecipientKeyPair.publicKeyLength + 4
        else {
            throw SessionTransferError(.malformedRecipient, "not a vault recipient key (one line starting with \(Self.prefix))")
        }
        let key = Array(bytes.prefix(RecipientKeyPair.publicKeyLength))
        guard Array(bytes.suffix(4)) == Self.checksum(key) else {
            throw SessionTransferError(.malformedRecipient, "the recipient key is mistyped: its checksum does not match (copy it again)")
        }
        publicKey = key
    }

    public var description: String { Self.prefix + Base64URL.encode(publicKey + Self.checksum(publicKey)) }

    /// Eight bytes naming the key in a blob's clear header and in records.
    var hint: [UInt8] { RecipientKeyPair.checksum(publicKey, domain: "credentialvault.recipient.fingerprint.v1", length: 8) }

    /// The key's name in messages and records: 16 hex digits.
    public var fingerprint: String { Digest.hex(hint) }

    private static func checksum(_ key: [UInt8]) -> [UInt8] {
        RecipientKeyPair.checksum(key, domain: "credentialvault.recipient.checksum.v1", length: 4)
    }
}

/// The armored form of a session export: `cvsession1:` and base64url (no padding, canonical) of
///
/// ```
/// offset  size  field
/// 0       1     format version (1)
/// 1       8     the recipient's fingerprint (so a wrongly addressed blob gets its own message)
/// 9       …     crypto_box_seal of the payload's JSON, to the recipient's public key
/// ```
///
/// Everything that matters (the id, the expiry, the recipient, the account, the policy,
/// the deadlines and the tokens) is inside the sealed box: a change to any byte is refused.
enum SessionArmor {
    static let prefix = "cvsession1:"
    static let version: UInt8 = 1
    static let headerLength = 9
    /// Bytes an armored blob may have: far above any real session, far below memory trouble.
    static let maximumLength = 256 * 1024

    /// Leading and trailing spaces, tabs and line ends only (what a paste adds).
    static func trimmed(_ text: String) -> Substring {
        let edges: Set<Character> = [" ", "\t", "\n", "\r", "\r\n"]
        var slice = Substring(text)
        while let first = slice.first, edges.contains(first) { slice = slice.dropFirst() }
        while let last = slice.last, edges.contains(last) { slice = slice.dropLast() }
        return slice
    }
}

/// What a session export carries, sealed. Field names are the JSON's (snake case).
struct SessionPayload: Codable, Sendable {
    static let format = "credentialvault.session.v1"

    var format: String
    /// 32 lowercase hex digits: the transfer's id, remembered by the importing vault.
    var id: String
    var createdAt: Int64
    var expiresAt: Int64
    /// The recipient key it was sealed to (`cvr1:…`).
    var recipient: String
    var mode: SessionTransferMode
    var from: Sender
    var account: AccountPart
    var policy: PolicyPart
    var session: SessionPart
    var tokens: TokensPart

    struct Sender: Codable, Sendable {
        var host: String?
        /// The exporting vault's recipient fingerprint.
        var vault: String
    }

    struct AccountPart: Codable, Sendable {
        var issuer: String
        var subject: String
        var subjectSource: SubjectSource?
        var kind: AccountKind
        var label: String?
        var email: String?
        var tokenEndpoint: String
        var revocationEndpoint: String?
        var clientId: String
        var clientAuth: ClientAuthentication
        var clientSecret: String?
        var scopes: [String]
        var pins: [String]
        var providerMetadata: String?
        var credentialHosts: [String]
        var credentialUsername: String?
    }

    struct PolicyPart: Codable, Sendable {
        var idleTimeoutMs: Int64?
        var warningMs: Int64
        var maxExtensions: Int
        var absoluteLifetimeMs: Int64?
        var backgroundTimeoutMs: Int64?
        var idleAction: SessionPolicy.IdleAction
        var activity: SessionPolicy.Activity
        /// Schema 17's; absent from older blobs.
        var sensitiveCapMs: Int64?
        var refreshLifetimeMs: Int64?
    }

    struct SessionPart: Codable, Sendable {
        var startedAt: Int64
        var authTime: Int64?
        var absoluteDeadline: Int64?
    }

    struct TokensPart: Codable, Sendable {
        var accessToken: String
        var refreshToken: String?
        var idToken: String?
        var tokenType: String
        var expiresAt: Int64?
        var scopes: [String]
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = .sortedKeys
        return encoder
    }

    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return decoder
    }
}

extension SessionPayload.PolicyPart {
    init(_ policy: SessionPolicy) {
        idleTimeoutMs = policy.idleTimeout.map(Self.milliseconds)
        warningMs = Self.milliseconds(policy.warningBefore)
        maxExtensions = policy.maxExtensions
        absoluteLifetimeMs = policy.absoluteLifetime.map(Self.milliseconds)
        backgroundTimeoutMs = policy.backgroundTimeout.map(Self.milliseconds)
        idleAction = policy.idleAction
        activity = policy.activity
        sensitiveCapMs = policy.sensitiveActionCap.map(Self.milliseconds)
        refreshLifetimeMs = policy.refreshTokenLifetime.map(Self.milliseconds)
    }

    var policy: SessionPolicy {
        SessionPolicy(
            idleTimeout: idleTimeoutMs.map { .milliseconds($0) }, warningBefore: .milliseconds(warningMs),
            maxExtensions: maxExtensions, absoluteLifetime: absoluteLifetimeMs.map { .milliseconds($0) },
            backgroundTimeout: backgroundTimeoutMs.map { .milliseconds($0) }, idleAction: idleAction, activity: activity,
            sensitiveActionCap: sensitiveCapMs.map { .milliseconds($0) }, refreshTokenLifetime: refreshLifetimeMs.map { .milliseconds($0) })
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        let parts = duration.components
        return parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
    }
}
