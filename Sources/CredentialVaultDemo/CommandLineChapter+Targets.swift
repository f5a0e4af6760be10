import DevGateway
import Foundation
import VaultOAuth

// MARK: - Tokens for other APIs (RFC 8707)

extension CommandLineChapter {
    /// Machine A asks for a token for the files API alone: the files API takes it, the mail API
    /// refuses it. Then the identity service starts ignoring resource indicators: its token names
    /// another audience, and the vault refuses to hand it out. No token is ever printed.
    static func targets(gateway: DevGateway, machine: Machine, narrator: Narrator) async throws {
        narrator.chapter("A token for one API only: `vault token --resource`")
        let files = gateway.resourceServer(named: "files")
        narrator.say("machine \(machine.name)> vault token --resource \(files) --scope profile   (printed to a variable, not shown)")
        let token = try await machine.run(["token", "--resource", files, "--scope", "profile"], narrator: narrator, show: false)
        guard token.status == 0 else {
            narrator.say("  exit \(token.status): \(token.stderr)")
            return
        }
        let value = token.stdout.trimmingCharacters(in: .newlines)
        let http = NIOTransport(timeout: .seconds(10))
        for server in ["files", "mail"] {
            var headers = HTTPHeaderFields()
            headers["Authorization"] = "Bearer \(value)"
            let url = gateway.baseURL.appendingPathComponent("rs/\(server)/whoami")
            let answer = try await http.send(HTTPRequest(method: .get, url: url, headers: headers))
            narrator.say("  GET /rs/\(server)/whoami with it → HTTP \(answer.status)\(answer.status == 200 ? "" : " (a token for another API)")")
        }
        let json = try await machine.run(["token", "--resource", files, "--scope", "profile", "--json"], narrator: narrator, show: false)
        let kept = (try? JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["token"] as? String
        narrator.say("  asked again: \(kept == value ? "the same token, kept in the vault beside the account's own" : "a different token")")

        narrator.say("(the identity service now ignores resource indicators: its tokens name its own API)")
        await gateway.ignoreResourceIndicators(true)
        defer { Task { await gateway.ignoreResourceIndicators(false) } }
        let mail = gateway.resourceServer(named: "mail")
        let refused = try await machine.run(["token", "--resource", mail], narrator: narrator, show: false)
        narrator.say("machine \(machine.name)> vault token --resource \(mail)")
        // The command's own line (the session's warning log line precedes it on standard error).
        let message = refused.stderr.split(separator: "\n").last { $0.hasPrefix("vault:") } ?? ""
        narrator.say("  exit \(refused.status): \(message)")
        narrator.say("  printed: \(refused.stdout.isEmpty ? "nothing" : "a token (wrong!)")")
    }
}
