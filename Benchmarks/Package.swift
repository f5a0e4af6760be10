// swift-tools-version: 6.1
// `make bench`: the vault's hot paths against baselines measured in the same run.
// Its own package (own .build) so the root package's `swift test` never builds it.
import PackageDescription

/// SwiftPM names a path dependency after its folder: the clone's folder, whatever it is called.
let root = String(#filePath.split(separator: "/").dropLast(2).last ?? "main")

let package = Package(
    name: "CredentialVaultBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The baseline of the DPoP proof: one P-256 signature, made as jwt-kit makes it.
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
    ],
    targets: [
        // libsodium for the baselines only (crypto_pwhash, one AEAD open); the vault reaches it through VaultCrypto.
        .systemLibrary(name: "CSodiumBaseline", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .executableTarget(
            name: "VaultBench",
            dependencies: [
                "CSodiumBaseline",
                .product(name: "VaultStore", package: root),
                .product(name: "VaultSession", package: root),
                .product(name: "VaultCrypto", package: root),
                .product(name: "VaultOAuth", package: root),
                .product(name: "VaultAgent", package: root),
                .product(name: "AgentWire", package: root),
                .product(name: "DevGateway", package: root),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
