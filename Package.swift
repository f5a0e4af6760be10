// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "CredentialVault",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "VaultCrypto", targets: ["VaultCrypto"]),
        .library(name: "VaultStore", targets: ["VaultStore"]),
        .library(name: "VaultOAuth", targets: ["VaultOAuth"]),
        .library(name: "DevGateway", targets: ["DevGateway"]),
        .library(name: "VaultSession", targets: ["VaultSession"]),
        .library(name: "AgentWire", targets: ["AgentWire"]),
        .library(name: "VaultAgent", targets: ["VaultAgent"]),
        .library(name: "VaultURLSession", targets: ["VaultURLSession"]),
        .executable(name: "vault", targets: ["vault"]),
        .executable(name: "vault-lean", targets: ["vault-lean"]),
    ],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swhitty/FlyingFox", from: "0.27.1"),
        .package(url: "https://github.com/pointfreeco/swift-clocks", from: "1.1.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // The transport that can see the TLS chain (SPKI pinning) and bounds every request.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // NIOHTTP1ProxyConnectHandler: the CONNECT tunnel through an HTTPS_PROXY.
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        // Tests only: keys for the self-signed chain of the loopback TLS server.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // ID-token signatures (JWS over JWKS: RS256, ES256, EdDSA) — verified in VaultOAuth, made
        // by the development gateway. No hand-written signature code.
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.8.0"),
        // `make docs`: the DocC command plugin (`swift package generate-documentation`). No target uses it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // libsodium, the only crypto implementation. Reached through VaultCrypto, and by AgentWire
        // for the SHA-256 that names the agent's socket (no Foundation there).
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // prctl(2) for the `vault` process (variadic in C, so Swift cannot call it): no core dumps.
        .target(name: "CProcessControl"),
        // The desktop keyring (Secret Service) through libsecret, loaded with dlopen when first
        // used: nothing links libsecret or GLib, so a server without them runs `vault` as before.
        .target(name: "CSecretService"),
        // A key sealed to the TPM through tpm2-tss (ESAPI), loaded with dlopen when first used:
        // only its headers are needed to build (libtss2-dev); a server without a TPM keeper
        // needs no tpm2-tss installed.
        .target(name: "CTPM2"),
        // The one lock type, a pthread mutex that ThreadSanitizer can see (see Locked.swift).
        .target(name: "VaultSync"),
        // Child processes started with posix_spawn (not Foundation's Process), waited for off
        // the cooperative pool: `vault exec` and the tests' children.
        .target(name: "VaultProcess"),
        .target(
            name: "VaultCrypto",
            dependencies: ["CSodium", "VaultSync"]
        ),
        // Embeds Migrations/*.sql into VaultStore at build time, so an installed
        // or copied binary never looks for SQL files next to itself.
        .executableTarget(name: "MigrationEmbedder"),
        .plugin(
            name: "EmbedMigrations",
            capability: .buildTool(),
            dependencies: ["MigrationEmbedder"]
        ),
        .target(
            name: "VaultStore",
            dependencies: [
                "VaultSync", "VaultCrypto",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            plugins: ["EmbedMigrations"]
        ),
        // What an OAuth server sends, parsed (token responses, error bodies) and redacted: Foundation
        // only, so the fuzz targets build it under libFuzzer alone (Fuzz/run.sh). VaultOAuth
        // re-exports it.
        .target(name: "OAuthWire"),
        // OAuth 2.0 token and revocation endpoints (RFC 6749 §6, RFC 7009) behind a transport protocol.
        // Transports: URLSession, and HTTP/1.1 over SwiftNIO + NIOSSL, which checks SPKI pins
        // against the validated chain (swift-certificates) before a byte of the request is sent.
        .target(
            name: "VaultOAuth",
            dependencies: [
                "OAuthWire", "VaultSync", "VaultCrypto",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOExtras", package: "swift-nio-extras"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "JWTKit", package: "jwt-kit"),
                // DPoP proofs sign with swift-crypto's P-256 directly (the key jwt-kit wraps).
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // URLSession as an HTTPTransport. Apart from VaultOAuth so that linking that never loads
        // FoundationNetworking and libcurl; `vault` does not link it.
        .target(
            name: "VaultURLSession",
            dependencies: ["VaultSync", "VaultOAuth"]
        ),
        // The development identity gateway: a real HTTP server on loopback for tests and the demo.
        .target(
            name: "DevGateway",
            dependencies: [
                .product(name: "FlyingFox", package: "FlyingFox"),
                .product(name: "FlyingSocks", package: "FlyingFox"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        // The session service: refresh, revocation, timeouts, accounts. What client tools call.
        .target(
            name: "VaultSession",
            dependencies: [
                "VaultSync", "VaultStore", "VaultCrypto", "VaultOAuth",
                .product(name: "Logging", package: "swift-log"),
                // NIOThreadPool: the blocking-I/O threads every vault call runs on.
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The agent's wire protocol, its Unix-socket server (peers checked with SO_PEERCRED) and
        // the client a tool links to ask a running agent for a token without holding the key.
        // Agent protocol 2, the socket's places and the local-trust checks (directory, owner,
        // SO_PEERCRED), with no Foundation: shared by VaultAgent and the lean client.
        // libsodium's SHA-256 names the socket.
        .target(
            name: "AgentWire",
            dependencies: ["CProcessControl", "CSodium"]
        ),
        .target(
            name: "VaultAgent",
            dependencies: [
                "AgentWire", "VaultSync",
                // Pinentry: started with posix_spawn; its answers wiped with explicit_bzero.
                "VaultProcess", "CProcessControl",
                // The server's event loop (no thread per connection).
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The token socket of `vault exec --keep-fresh` (HTTP, for curl and any client).
                .product(name: "NIOHTTP1", package: "swift-nio"),
                // ServerQuiescingHelper: every connection closed on the running loops at stop.
                .product(name: "NIOExtras", package: "swift-nio-extras"),
            ]
        ),
        // `vault-lean`: asks a running agent for a token and prints it, linking only AgentWire
        // and the standard library (statically), so a whole `vault token` process starts about
        // as fast as the sqlite3 CLI. Installed as `vault` and as the git and docker helper
        // names; anything it does not serve runs the full command beside it.
        .executableTarget(
            name: "vault-lean",
            dependencies: ["AgentWire", "CProcessControl"]
        ),
        // The admin command: inspects, verifies, migrates, re-keys and repairs a vault. Thin.
        .executableTarget(
            name: "vault",
            dependencies: [
                "CProcessControl", "VaultSync", "VaultSession", "VaultStore", "VaultCrypto", "VaultOAuth", "AgentWire", "VaultAgent", "VaultProcess",
                "CSecretService", "CTPM2",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // NIOThreadPool: the agent's blocking vault work (key derivation, SQLite) runs there.
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            plugins: ["StampVersion"]
        ),
        // `vault --version` from the clone's git tags (`Plugins/StampVersion`).
        .plugin(name: "StampVersion", capability: .buildTool()),
        // `make demo`: the whole product on a fresh vault against the development gateway.
        .executableTarget(
            name: "CredentialVaultDemo",
            dependencies: [
                "VaultSession", "VaultStore", "VaultOAuth", "DevGateway",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "VaultTestSupport",
            dependencies: [
                "VaultSync", "VaultStore", "VaultCrypto", "VaultProcess",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Clocks", package: "swift-clocks"),
                // The loopback TLS server and the certificate chain it presents.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            path: "Tests/VaultTestSupport"
        ),
        // Writes Tests/Fixtures/vault-vN.db with the code of schema version N.
        .executableTarget(
            name: "FixtureMaker",
            dependencies: ["VaultStore", "VaultCrypto", "VaultTestSupport"],
            path: "Tests/FixtureMaker"
        ),
        .testTarget(
            name: "VaultCryptoTests",
            dependencies: ["VaultSync", "VaultCrypto", "VaultTestSupport"]
        ),
        // A child process for multi-process session tests: opens a vault and asks for tokens.
        .executableTarget(
            name: "SessionProbe",
            dependencies: ["VaultSession", "VaultStore", "VaultOAuth", "VaultURLSession", "VaultTestSupport"],
            path: "Tests/SessionProbe"
        ),
        .testTarget(
            name: "VaultSessionTests",
            dependencies: [
                "VaultSync", "VaultSession", "VaultStore", "VaultOAuth", "VaultURLSession", "DevGateway", "VaultTestSupport",
                "SessionProbe",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "VaultCommandTests",
            dependencies: [
                "vault", "vault-lean", "AgentWire", "VaultAgent", "VaultStore", "VaultTestSupport", "DevGateway", "VaultCrypto", "VaultProcess",
                // `vault exec`'s signal forwarding, tested at its C boundary.
                "CProcessControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // NIOTransport plays the browser in the `vault login --browser` tests.
                "VaultOAuth",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "VaultDeviceTests",
            dependencies: [
                "VaultSync", "VaultSession", "VaultStore", "VaultOAuth", "VaultURLSession", "DevGateway", "VaultTestSupport",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Crashes, concurrency, tampering and bad input (issue 7): small counts in `make test`,
        // large ones in `make stress` (STRESS_SCALE).
        .testTarget(
            name: "VaultReliabilityTests",
            dependencies: [
                "VaultSync", "VaultSession", "VaultStore", "VaultCrypto", "VaultOAuth", "DevGateway", "VaultTestSupport",
                "SessionProbe", "vault",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "VaultOAuthTests",
            dependencies: [
                "VaultSync", "VaultOAuth", "VaultURLSession", "DevGateway", "VaultTestSupport",
                .product(name: "Clocks", package: "swift-clocks"),
                // ID tokens signed by keys the tests make, for a test per verifier check.
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "VaultStoreTests",
            dependencies: [
                "VaultStore", "VaultCrypto", "VaultSync", "VaultTestSupport", "VaultProcess",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .system && target.type != .plugin {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("ExistentialAny"),
            .enableUpcomingFeature("MemberImportVisibility"),
        ]
}
