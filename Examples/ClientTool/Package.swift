// swift-tools-version: 6.1
// A client tool that keeps its user's sign-in in a CredentialVault, as a tool author would
// write it: the package is a dependency (here by path; elsewhere by URL and version).
import PackageDescription

let package = Package(
    name: "ClientTool",
    platforms: [.macOS(.v15)],
    dependencies: [
        // Elsewhere: .package(url: "https://github.com/OWNER/CredentialVault", from: "0.1.0")
        .package(name: "CredentialVault", path: "../.."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        // The tool: `client-tool login --issuer URL`, `client-tool profile --api URL`.
        .executableTarget(
            name: "client-tool",
            dependencies: [
                .product(name: "VaultSession", package: "CredentialVault"),
                .product(name: "VaultStore", package: "CredentialVault"),
                .product(name: "VaultOAuth", package: "CredentialVault"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Runs the tool against the development gateway on loopback and plays the user (CI).
        .executableTarget(
            name: "example-check",
            dependencies: [
                .product(name: "DevGateway", package: "CredentialVault"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
