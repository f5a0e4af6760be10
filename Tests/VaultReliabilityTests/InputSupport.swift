import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultStore
import VaultTestSupport

/// Runs `body`, requires a ``VaultError`` with `code`, and returns it.
@discardableResult
func expectRefusal<T>(
    _ code: VaultError.Code, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> T
) -> VaultError? {
    do {
        let value = try body()
        Issue.record("expected VaultError \(code), got a value of type \(type(of: value))", sourceLocation: sourceLocation)
        return nil
    } catch let error as VaultError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected VaultError \(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Case 11 of issue 7: every test of this target hands its captured trace logs (and any
/// error text or command output) here with the secrets it used.
enum LogHygiene {
    /// The ways a secret could show up in text: as itself, and bytes also as hex and base64.
    static func forms(ofText secret: String) -> [String] { [secret] }

    static func forms(ofBytes bytes: [UInt8]) -> [String] {
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        var forms = [hex, hex.uppercased(), Data(bytes).base64EncodedString()]
        if let text = String(validating: bytes, as: UTF8.self), text.count >= 8 { forms.append(text) }
        // The raw bytes as a Latin-1 string, as a careless `String(decoding:)` might show them.
        forms.append(String(bytes.map { Character(Unicode.Scalar($0)) }))
        return forms.filter { $0.count >= 8 }
    }

    /// The 32 bytes of a key file, in every form a leak could take.
    static func forms(ofKeyFile url: URL) -> [String] { forms(ofBytes: FileProbe.bytes(url)) }

    /// Records an issue for every secret form found in the logs or in `texts`.
    static func check(
        _ logs: CapturedLogs, texts: [String] = [], secrets: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(!logs.lines.isEmpty || !texts.isEmpty, "nothing was captured to check", sourceLocation: sourceLocation)
        let haystacks = logs.lines + texts
        var (searched, leaked) = (0, 0)
        for secret in secrets where !secret.isEmpty {
            let leaks = haystacks.filter { $0.contains(secret) }.count
            searched += 1
            if leaks > 0 { leaked += 1 }
            // Never print the secret itself: only where it leaked.
            #expect(
                leaks == 0, "a secret (\(secret.count) characters) appears in \(leaks) captured line(s)",
                sourceLocation: sourceLocation)
        }
        StressResults.record(
            StressCount(
                case: "11 secrets searched in every captured log and output", tried: searched,
                passed: searched - leaked, lost: 0, leaked: leaked))
    }

    /// The secrets of a ``TestVault``: its passphrase or its key file.
    static func secrets(of test: TestVault) -> [String] {
        switch test.credential {
        case .keyFile(let url): forms(ofKeyFile: url)
        case .passphraseBytes: [TestVault.passphrase]
        case .key(let key, _): forms(ofBytes: (try? key.withUnsafeBytes { Array($0) }) ?? [])
        }
    }
}

/// One run of the built `vault` binary (as Tests/VaultCommandTests runs it).
struct VaultRun: CustomStringConvertible {
    var arguments: [String]
    var status: Int32
    var stdout: String
    var stderr: String
    var output: String { stdout + "\n" + stderr }
    var description: String { "vault \(arguments.joined(separator: " ")) → \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// Runs `vault ARGUMENTS` with a controlled environment (only `environment` and PATH/HOME).
    static func run(
        _ arguments: [String], environment: [String: String], stdin: String = "",
        in directory: TemporaryDirectory
    ) async throws -> VaultRun {
        let output = try await BuiltProgram.run(
            try BuiltProgram.url(named: "vault"), arguments,
            environment: ["PATH": "/usr/bin:/bin", "HOME": directory.url.path].merging(environment) { $1 },
            stdin: stdin, in: directory)
        return VaultRun(arguments: arguments, status: output.status, stdout: output.stdout, stderr: output.stderr)
    }
}

extension Samples {
    /// Tokens with a fixed whole-millisecond expiry, so equal tags give equal sets.
    static func steadyTokens(_ tag: String) -> TokenSet {
        tokens(tag, expiresAt: Date(timeIntervalSince1970: 1_800_003_600))
    }
}
