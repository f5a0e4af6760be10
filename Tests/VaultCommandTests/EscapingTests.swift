import Foundation
import Testing
import VaultStore
import VaultTestSupport

/// Every text the vault did not choose (a label, a subject the server named, an e-mail, a device
/// name, a notification's words, a reason) reaches a terminal with its control characters shown
/// escaped: a hostile server or a crafted import cannot send escape sequences to the user's terminal.
@Suite("control characters in stored fields are escaped in every listing")
struct EscapingTests {
    /// ESC (a colour, a title change), BEL and a C1 CSI: what a terminal would act on.
    static let hostile = "\u{1B}[31m\u{1B}]0;pwned\u{07}\u{9B}2J"

    @Test(
        "accounts list/show, status, sessions list, devices list, notifications list and events print no control character raw",
        arguments: [
            ["accounts", "list"], ["accounts", "show"], ["status"], ["sessions", "list"], ["devices", "list"],
            ["notifications", "list"], ["events"],
        ])
    func noRawControlCharacters(command: [String]) async throws {
        let cli = try await VaultCLI.keyFileVault()
        let vault = try Vault.open(at: cli.vault, credential: .keyFile(cli.file("vault.key")))
        let now = Date()
        let account = try vault.accounts.signIn(
            NewAccount(
                issuer: "https://id.example.test/\(Self.hostile)", subject: "alice\(Self.hostile)", label: "Work\(Self.hostile)",
                email: "alice\(Self.hostile)@example.test",
                client: OAuthClientSettings(
                    tokenEndpoint: URL(fileURLWithPath: "/").deletingLastPathComponent(), clientID: "cli\(Self.hostile)")),
            tokens: TokenSet(accessToken: "a", refreshToken: "r", accessTokenExpiresAt: now.addingTimeInterval(3600)),
            policy: SessionPolicy()
        ).account.id
        try vault.devices.save(
            DeviceRegistration(
                account: account, deviceID: vault.deviceID, name: "Laptop\(Self.hostile)", platform: "linux\(Self.hostile)",
                status: .revoked, statusReason: "revoked by\(Self.hostile)", createdAt: now, updatedAt: now))
        _ = try vault.notifications.upsert(
            NotificationRecord(
                uuid: "n-1", account: account, subject: "Sign in\(Self.hostile)", message: "from\(Self.hostile)",
                actions: [NotificationAction(label: "OK\(Self.hostile)", action: "ok")], createdAt: now))
        try vault.events.append(
            kind: "refresh_failed", account: account, data: ["reason": "server\(Self.hostile)"],
            detail: "the server said\(Self.hostile)", origin: "test", retention: EventRetention())
        vault.close()

        let result = try await cli.run(command)
        #expect(result.status == 0, "\(result)")
        #expect(!result.stdout.isEmpty)
        for (stream, text) in [("stdout", result.stdout), ("stderr", result.stderr)] {
            let raw = text.unicodeScalars.filter { $0.properties.generalCategory == .control && $0 != "\n" && $0 != "\t" }
            #expect(
                raw.isEmpty, "\(command.joined(separator: " ")) printed \(raw.map { String($0.value, radix: 16) }) raw on \(stream): \(text.debugDescription)")
        }
    }
}
