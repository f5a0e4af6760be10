import Foundation
import Logging
import VaultCrypto
import VaultStore

/// Ready-made vaults for tests: a private directory, a vault file in it, and the credential.
public struct TestVault: Sendable {
    public enum Kind: String, Sendable, CaseIterable, CustomStringConvertible {
        case keyFile
        case passphrase
        public var description: String { rawValue }
    }

    public let directory: TemporaryDirectory
    public let url: URL
    public let kind: Kind
    public let credential: VaultCredential
    public let logs: CapturedLogs
    /// The passphrase used for `.passphrase` vaults (a test value, not a secret).
    public static let passphrase = "test passphrase for a throwaway vault"

    /// The cheapest Argon2id cost a vault accepts, to keep passphrase tests fast.
    public static var fastKDF: KDFParameters { .owaspFloor }

    /// Creates the directory and credential (a key file or a passphrase); not the vault.
    public init(_ kind: Kind = .keyFile) throws {
        directory = try TemporaryDirectory()
        url = directory.file("vault.db")
        self.kind = kind
        logs = CapturedLogs()
        switch kind {
        case .keyFile:
            let keyURL = directory.file("vault.key")
            try VaultCredential.createKeyFile(at: keyURL)
            credential = .keyFile(keyURL)
        case .passphrase:
            credential = try .passphrase(Self.passphrase)
        }
    }

    /// Options with captured logs and a fast KDF.
    public func options(clock: WallClock = .system) -> VaultOptions {
        VaultOptions(logger: logs.logger(), clock: clock, kdf: Self.fastKDF)
    }

    public func create(clock: WallClock = .system) throws -> Vault {
        try Vault.create(at: url, credential: credential, options: options(clock: clock))
    }

    public func open(clock: WallClock = .system) throws -> Vault {
        try Vault.open(at: url, credential: credential, options: options(clock: clock))
    }
}

/// Sample records for round trips.
public enum Samples {
    public static func client(_ endpoint: String = "https://id.example.test") -> OAuthClientSettings {
        OAuthClientSettings(
            tokenEndpoint: URL(string: "\(endpoint)/oauth/token") ?? URL(fileURLWithPath: "/"),
            revocationEndpoint: URL(string: "\(endpoint)/oauth/revoke"),
            clientID: "cli-tool", scopes: ["openid", "profile"])
    }

    public static func account(_ subject: String = "alice") -> NewAccount {
        NewAccount(
            issuer: "https://id.example.test", subject: subject, label: "\(subject) (work)",
            email: "\(subject)@example.test", client: client())
    }

    /// Tokens with distinctive, searchable values.
    public static func tokens(_ tag: String, expiresAt: Date = Date(timeIntervalSinceNow: 3600)) -> TokenSet {
        TokenSet(
            accessToken: "AT-\(tag)-0123456789abcdef", refreshToken: "RT-\(tag)-fedcba9876543210",
            idToken: "IDT-\(tag)-aabbccdd", tokenType: "Bearer", accessTokenExpiresAt: expiresAt, scopes: ["openid"])
    }
}
