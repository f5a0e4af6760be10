import Foundation
import Testing
import VaultTestSupport

/// The habits `vault`'s users bring from git and gh (issue 17): global options in either
/// position, the documented exit codes, bounded input, and no directory made by a typo.
@Suite("vault command habits")
struct CommandHabitsTests {
    @Test("--vault and -v work before the subcommand as after it")
    func globalOptionsInBothPositions() async throws {
        let cli = try await VaultCLI.keyFileVault()
        let other = cli.file("other.db")
        try #require(try await cli.run(["init", "--vault", other.path, "--key-file", cli.file("other.key").path]).status == 0)
        for arguments in [
            ["--vault", other.path, "status", "--json"], ["status", "--json", "--vault", other.path],
            ["-v", "--vault=\(other.path)", "status", "--json"],
        ] {
            let status = try await cli.run(arguments)
            #expect(status.status == 0, "\(arguments): \(status.stderr)")
            #expect(try status.jsonObject()["path"] as? String == other.path, "\(arguments)")
        }
    }

    @Test("--version comes from the build (the clone's git tags or commit), not a constant in the source")
    func versionFromTheBuild() async throws {
        let cli = try VaultCLI()
        let version = try await cli.run(["--version"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.range(of: #"^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.+-]+)?$"#, options: .regularExpression) != nil, "\(version)")
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/git"),
            FileManager.default.fileExists(atPath: root.appendingPathComponent(".git").path)
        else {
            print("skipped the commit check: not a git clone")
            return
        }
        // A release tag, or a commit of this clone (the one the binary was built from).
        if version.range(of: #"^[0-9]+\.[0-9]+\.[0-9]+$"#, options: .regularExpression) != nil {
            let tag = try await BuiltProgram.run(
                URL(fileURLWithPath: "/usr/bin/git"), ["-C", root.path, "rev-parse", "--verify", "refs/tags/v" + version],
                environment: ["PATH": "/usr/bin:/bin"], stdin: "", in: cli.directory)
            #expect(tag.status == 0, "\(version) is not a release tag of this clone: a constant?")
            return
        }
        let commit = try #require(version.firstMatch(of: #/g([0-9a-f]{7,40})/#).map { String($0.1) }, "\(version) names no commit")
        let known = try await BuiltProgram.run(
            URL(fileURLWithPath: "/usr/bin/git"), ["-C", root.path, "cat-file", "-e", commit + "^{commit}"],
            environment: ["PATH": "/usr/bin:/bin"], stdin: "", in: cli.directory)
        #expect(known.status == 0, "\(version) names \(commit), which is not a commit of this clone")
    }

    @Test("a key file others can read exits 82 (unsafe permissions), not 64")
    func exposedKeyFile() async throws {
        let cli = try await VaultCLI.keyFileVault()
        #expect(chmod(cli.file("vault.key").path, 0o644) == 0)
        let result = try await cli.run(["token"])
        #expect(result.status == 82, "\(result.stderr)")
        #expect(result.stderr.contains("chmod 600"))
    }

    @Test("backup into a directory that does not exist is refused and makes no directory")
    func backupIntoMissingDirectory() async throws {
        let cli = try await VaultCLI.keyFileVault()
        let missing = cli.file("no-such-dir")
        let result = try await cli.run(["backup", missing.appendingPathComponent("copy.db").path])
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("does not exist"))
        #expect(!FileManager.default.fileExists(atPath: missing.path))
    }

    @Test("accounts add: input past 1 MiB is refused as such; an RFC 6749 §5.2 error response is reported as the server's refusal")
    func accountsAddInput() async throws {
        let cli = try await VaultCLI.keyFileVault()
        let arguments = ["accounts", "add", "--token-endpoint", "https://id.example.test/token", "--client-id", "cli", "--subject", "alice"]
        let huge = try await cli.run(arguments, stdin: String(repeating: "y\n", count: 1_100_000))
        #expect(huge.status == 64)
        #expect(huge.stderr.contains("larger than"))
        let refusal = try await cli.run(arguments, stdin: #"{"error": "invalid_grant", "error_description": "code expired"}"#)
        #expect(refusal.status == 76, "\(refusal.stderr)")
        #expect(refusal.stderr.contains("invalid_grant: code expired"))
        #expect(try await cli.run(["accounts", "list", "--json"]).jsonArray().isEmpty)
    }
}
