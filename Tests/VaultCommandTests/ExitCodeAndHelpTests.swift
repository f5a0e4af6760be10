import AgentWire
import ArgumentParser
import Foundation
import GRDB
import Testing
import VaultTestSupport

@testable import vault

@Suite("vault exit codes and help")
struct ExitCodeAndHelpTests {
    /// Every command and subcommand, walked from the command tree itself (a new one is never left out).
    static let commands: [[String]] = {
        func walk(_ command: any ParsableCommand.Type, _ path: [String]) -> [[String]] {
            [path] + command.configuration.subcommands.flatMap { walk($0, path + [$0._commandName]) }
        }
        return walk(VaultCommand.self, [])
    }()

    @Test("the README's command table names every command the tree has")
    func readmeNamesEveryCommand() throws {
        let readme = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appending(path: "README.md"), encoding: .utf8)
        let leaves = Self.commands.filter { path in
            !path.isEmpty && !Self.commands.contains { $0.count == path.count + 1 && Array($0.prefix(path.count)) == path }
        }
        #expect(leaves.count >= 40, "the walk found \(leaves.count) commands")
        let missing = leaves.filter { !readme.contains("`vault \($0.joined(separator: " "))") }
        #expect(missing.isEmpty, "not in the README: \(missing.map { $0.joined(separator: " ") })")
    }

    @Test("--help for every command exits 0 and explains it", arguments: commands)
    func help(_ command: [String]) async throws {
        let cli = try VaultCLI()
        let result = try await cli.run(command + ["--help"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("OVERVIEW:"))
        #expect(result.stdout.contains("USAGE: vault"))
    }

    @Test("the exit codes are one list: the command's own (ExitStatus), its --help, the README's table and the lean client's agree")
    func exitCodeTable() async throws {
        let declared = Set(ExitStatus.allCases.map(\.rawValue)).union([0])
        let help = try await VaultCLI().run(["--help"]).stdout.replacingOccurrences(of: "\n", with: " ")
        let paragraph = try #require(help.range(of: #"Exit codes:.*?interrupted\."#, options: .regularExpression).map { String(help[$0]) })
        // Each code opens its entry ("…, 84 step-up needed (sign in again with --max-age 0), 85 …").
        let inHelp = Set(paragraph.matches(of: #/(?:: |, )(\d{1,3}) /#).compactMap { Int32($0.1) })
        let readme = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("README.md"), encoding: .utf8)
        let table = try #require(readme.range(of: #"### Exit codes[\s\S]*?### "#, options: .regularExpression).map { String(readme[$0]) })
        let inReadme = Set(table.matches(of: #/\n\| (\d{1,3}) \|/#).compactMap { Int32($0.1) })
        #expect(inHelp == declared, "--help: missing \(declared.subtracting(inHelp).sorted()), extra \(inHelp.subtracting(declared).sorted())")
        #expect(inReadme == declared, "README: missing \(declared.subtracting(inReadme).sorted()), extra \(inReadme.subtracting(declared).sorted())")
        // The lean client exits with an agent failure's code only when it is one of these.
        #expect(WireProtocol.commandExitCodes.union([0]) == declared)
    }

    @Test("usage errors exit 64")
    func usage() async throws {
        let cli = try VaultCLI()
        for arguments in [
            ["bogus"], ["accounts", "add"], ["status", "--no-such-flag"], ["export"],
            ["notifications", "list", "--limit", "0"], ["init", "--kdf", "extreme"],
        ] {
            let result = try await cli.run(arguments)
            #expect(result.status == Exit.usage, "\(result)")
        }
    }

    @Test("a wrong passphrase exits 77 and a wrong key file too")
    func wrongCredential() async throws {
        let cli = try VaultCLI(environment: ["VAULT_PASSPHRASE": "the right one"])
        try #require(try await cli.run(["init"]).status == 0)
        let result = try await cli.run(["accounts", "list"], environment: ["VAULT_PASSPHRASE": "the wrong one"])
        #expect(result.status == Exit.wrongCredential, "\(result)")
        #expect(result.stderr.contains("wrong passphrase for \(cli.vault.path)"))

        let keyed = try VaultCLI()
        try #require(try await keyed.run(["init", "--key-file", keyed.file("a.key").path]).status == 0)
        _ = try await keyed.run(["init", "--vault", keyed.file("other.db").path, "--key-file", keyed.file("b.key").path])
        #expect(try await keyed.run(["verify", "--key-file", keyed.file("b.key").path]).status == Exit.wrongCredential)
    }

    @Test("a vault with a newer schema exits 78 and is left untouched")
    func schemaTooNew() async throws {
        let cli = try VaultCLI()
        let key = cli.file("vault.key")
        try #require(try await cli.run(["init", "--key-file", key.path]).status == 0)
        try Self.setUserVersion(99, of: cli.vault)
        let before = FileProbe.fingerprint(cli.vault)
        for arguments in [["status"], ["accounts", "list", "--key-file", key.path], ["migrate", "--key-file", key.path], ["token", "--key-file", key.path]] {
            let result = try await cli.run(arguments)
            #expect(result.status == Exit.schemaTooNew, "\(result)")
            #expect(result.stderr.contains("newer than this build"))
        }
        #expect(FileProbe.fingerprint(cli.vault) == before)
    }

    @Test("a command that needs a passphrase and has none exits 64 without waiting for input")
    func noPassphrase() async throws {
        let cli = try VaultCLI(environment: ["VAULT_PASSPHRASE": "p"])
        try #require(try await cli.run(["init"]).status == 0)
        let result = try await cli.run(["accounts", "list"], environment: ["VAULT_PASSPHRASE": ""])
        // With no terminal the command cannot ask; with one (a developer's shell) it would prompt.
        if result.status != 0 {
            #expect(result.status == Exit.usage, "\(result)")
            #expect(result.stderr.contains("VAULT_PASSPHRASE"))
        }
    }

    static func setUserVersion(_ version: Int, of vault: URL) throws {
        let queue = try DatabaseQueue(path: vault.path)
        try queue.write { try $0.execute(sql: "PRAGMA user_version = \(version)") }
        try queue.close()
    }
}
