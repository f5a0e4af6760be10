import DevGateway
import Foundation

/// The same device flow from the command line, as an administrator or a script does it: two
/// machines (two key-file vaults) of carol; A activates as the first device, B waits for an
/// approval that A gives with `vault notifications answer`, and A's `vault devices sync` then
/// lists both. Every command is the built `vault` binary, shown as typed.
enum CommandLineChapter {
    static func run(gateway: DevGateway, directory: URL, narrator: Narrator) async throws {
        narrator.chapter("The same from the command line: machine B approved with `vault notifications answer`")
        let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appending(path: "vault")
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            narrator.say("(skipped: no `vault` binary next to the demo at \(binary.path); `swift build` makes it)")
            return
        }
        let api = ["--api", gateway.baseURL.absoluteString]
        var machines: [Machine] = []
        for name in ["a", "b"] {
            let machine = Machine(name: name.uppercased(), binary: binary, directory: directory.appending(path: "machine-\(name)"))
            try FileManager.default.createDirectory(
                at: machine.directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
            _ = try await machine.run(["init", "--key-file", machine.keyFile.path], narrator: narrator, show: false)
            // A sign-in another program did, imported from its token response (never printed).
            let issued = await gateway.issueGrant(subject: "carol", clientID: "vault-demo")
            _ = try await machine.run(
                [
                    "accounts", "add", "--token-endpoint", gateway.tokenEndpoint.absoluteString,
                    "--client-id", "vault-demo", "--subject", "carol", "--label", "Carol (demo)",
                ],
                stdin: tokenResponse(issued), narrator: narrator)
            machines.append(machine)
        }
        let (a, b) = (machines[0], machines[1])
        _ = try await a.run(["devices", "activate", "--name", "Carol's desk"] + api, narrator: narrator)

        let requestsBefore = await gateway.stats().approvalRequests
        narrator.say("machine B> vault devices activate --name \"Carol's laptop\" --api …   (waits for an approval)")
        let waiting = Task { try await b.run(["devices", "activate", "--name", "Carol's laptop"] + api, narrator: narrator, show: false) }
        guard await gateway.waitForStats(upTo: .seconds(30), where: { $0.approvalRequests > requestsBefore }) else {
            narrator.say("machine B's approval request never reached the server")
            waiting.cancel()
            return
        }
        _ = try await a.run(["notifications", "sync"] + api, narrator: narrator)
        _ = try await a.run(["notifications", "list", "--pending"], narrator: narrator)
        let pending = try await a.run(["notifications", "list", "--pending", "--json"], narrator: narrator, show: false)
        guard let object = try JSONSerialization.jsonObject(with: Data(pending.stdout.utf8)) as? [String: Any],
            let uuid = (object["notifications"] as? [[String: Any]])?.first?["uuid"] as? String
        else {
            narrator.say("machine A has no pending approval request")
            waiting.cancel()
            return
        }
        _ = try await a.run(["notifications", "answer", uuid, "approve"] + api, narrator: narrator)
        let activated = try await waiting.value
        narrator.say("machine B's activate ended (exit \(activated.status)):")
        for line in (activated.stderr + activated.stdout).split(separator: "\n") { narrator.say("  \(line)") }
        _ = try await a.run(["devices", "sync"] + api, narrator: narrator)
        try await targets(gateway: gateway, machine: a, narrator: narrator)
        try await clients(gateway: gateway, machine: a, narrator: narrator)
    }

    static func tokenResponse(_ tokens: IssuedTokens) -> String {
        var object: [String: Any] = [
            "access_token": tokens.accessToken, "token_type": tokens.tokenType,
            "expires_in": tokens.expiresIn, "scope": tokens.scope,
        ]
        if let refresh = tokens.refreshToken { object["refresh_token"] = refresh }
        if let id = tokens.idToken { object["id_token"] = id }
        return (try? JSONSerialization.data(withJSONObject: object)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// One machine: its own vault file and key file; `vault` runs with only these in its environment.
    struct Machine: Sendable {
        let name: String
        let binary: URL
        let directory: URL
        var vault: URL { directory.appending(path: "vault.db") }
        var keyFile: URL { directory.appending(path: "vault.key") }

        struct Result: Sendable {
            var status: Int32
            var stdout: String
            var stderr: String
        }

        /// Runs `vault ARGUMENTS`; shows the command and what it printed unless `show` is false.
        func run(_ arguments: [String], stdin: String = "", narrator: Narrator, show: Bool = true) async throws -> Result {
            let process = Process()
            process.executableURL = binary
            process.arguments = arguments
            process.environment = [
                "PATH": "/usr/bin:/bin", "HOME": directory.path, "VAULT_PATH": vault.path,
                "VAULT_KEY_FILE": keyFile.path,
            ]
            // Output into files of the machine's private directory: no reader threads, no pipe to fill.
            let outURL = directory.appending(path: "stdout.txt")
            let errURL = directory.appending(path: "stderr.txt")
            for url in [outURL, errURL] { _ = FileManager.default.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600]) }
            defer { for url in [outURL, errURL] { try? FileManager.default.removeItem(at: url) } }
            let outHandle = try FileHandle(forWritingTo: outURL)
            let errHandle = try FileHandle(forWritingTo: errURL)
            defer {
                try? outHandle.close()
                try? errHandle.close()
            }
            let input = Pipe()
            process.standardInput = input
            process.standardOutput = outHandle
            process.standardError = errHandle
            let status: Int32 = try await withCheckedThrowingContinuation { continuation in
                process.terminationHandler = { ended in continuation.resume(returning: ended.terminationStatus) }
                do {
                    try process.run()
                } catch {
                    process.terminationHandler = nil
                    continuation.resume(throwing: error)
                    return
                }
                input.fileHandleForWriting.write(Data(stdin.utf8))  // small: fits the pipe's buffer
                try? input.fileHandleForWriting.close()
            }
            let result = Result(
                status: status, stdout: (try? String(contentsOf: outURL, encoding: .utf8)) ?? "",
                stderr: (try? String(contentsOf: errURL, encoding: .utf8)) ?? "")
            if show {
                let shown = arguments.map { $0.contains(" ") || $0.contains("'") ? "\"\($0)\"" : $0 }
                    .map { $0.hasPrefix("http://") ? "…" : $0 }
                narrator.say("machine \(name)> vault \(shown.joined(separator: " "))")
                for line in (result.stderr + result.stdout).split(separator: "\n") { narrator.say("  \(line)") }
            }
            return result
        }
    }
}
