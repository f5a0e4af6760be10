import AgentWire
import Foundation
import VaultAgent
import VaultStore

/// `vault exec --keep-fresh`: the child's token kept fresh by this process, which stays beside
/// the child and asks the vault's agent (never the key) for every token:
///
/// - the token file (``ChildTokenPlace``) is replaced before the token in it expires: when a
///   fifth of the provider's token lifetime is left (at least the `--min-ttl`, at most half the
///   lifetime), the agent is asked for one valid longer than what is left, which makes it
///   refresh. The lifetime is learned from the first such refresh: the first token may have
///   aged in the agent, so until then the `--min-ttl` alone is the lead;
/// - each request on the socket (``ChildTokenServer``) is a request to the agent, so its lock
///   rules apply at once: a locked agent's refusal is the answer (503), never a kept token.
///
/// Every token is for the account the first one was for: `vault accounts switch` meanwhile does
/// not hand the command another identity. After a failed refresh, the file keeps the last
/// token while it is valid and is emptied when it expires, or at once when the grant is gone
/// (session ended, revoked); the failure is reported once on standard error and retried (1 s,
/// 2 s, 4 s, 8 s, then every 10 s) until it works.
actor ChildTokenKeeper {
    private let client: AgentClient
    private var request: AgentRequest
    private let place: ChildTokenPlace
    /// `--min-ttl` in seconds: what a socket answer is valid for at least.
    private let minimumValidity: Int
    /// The token in the file (nil: the file is empty), and when it was written.
    private var current: (token: AgentToken, writtenAt: Double)?
    /// The provider's access-token lifetime in seconds: what the last token this process had the
    /// agent refresh had left when it reached the file (nil: no refresh yet).
    private var lifetime: Double?
    /// The last failure reported on standard error (each said once).
    private var reported: String?
    private let clock = WallClock.system

    private var now: Double { clock.now().timeIntervalSince1970 }

    init(client: AgentClient, request: AgentRequest, place: ChildTokenPlace, minimumValidity: Int) {
        (self.client, self.request, self.place, self.minimumValidity) = (client, request, place, minimumValidity)
    }

    /// The first token (the agent may ask for its passphrase on `terminal`); every later one is
    /// for the same account.
    func start(terminal: RequesterTerminal?) async throws {
        let token = try await fetch(minTTL: minimumValidity, terminal: terminal)
        request.account = token.account
    }

    /// A token from the agent valid for at least `minTTL` seconds; the file holds it after,
    /// unless it already holds one that lives longer.
    func fetch(minTTL: Int, terminal: RequesterTerminal? = nil) async throws -> AgentToken {
        var request = self.request
        (request.minTTL, request.terminal) = (max(minTTL, 1), terminal)
        guard let token = try await client.send(request).token else { throw AgentConnectionError.badAnswer("the agent answered without a token") }
        try VaultCommand.Token.checkTarget(of: token, resources: request.resources, scopes: request.scopes)
        try VaultCommand.Exec.checkBearerSyntax(token)
        if current.map({ $0.token.value != token.value && Self.expiry(token) > Self.expiry($0.token) }) ?? true {
            try place.write(token.value)
            current = (token, now)
        }
        return token
    }

    /// Keeps the file fresh until the task is cancelled.
    func keepFresh() async {
        var failures = 0
        while !Task.isCancelled {
            let now = self.now
            let (wake, ask) = Self.schedule(
                current: current.map { ($0.token.expiresAt, $0.writtenAt) }, lifetime: lifetime, failures: failures, now: now,
                minimumValidity: minimumValidity)
            guard let wake else { return }  // a token with no expiry stays as it is
            do {
                try await Task.sleep(for: .seconds(max(wake - now, 0)))
            } catch {
                return
            }
            let before = current?.token.value
            // A refresh that outlasts the file's token (an agent waiting on a slow provider):
            // the file is emptied as that token expires, never left holding it.
            let watchdog = current.map { Self.expiry($0.token) - Self.expiryMargin - self.now }.flatMap { left in
                left.isFinite
                    ? Task {
                        try? await Task.sleep(for: .seconds(max(left, 0)))
                        if !Task.isCancelled { self.expire(before) }
                    } : nil
            }
            defer { watchdog?.cancel() }
            do {
                _ = try await fetch(minTTL: ask)
                // Written only when it outlives the one in the file: anything else is no refresh.
                guard let (written, writtenAt) = current, written.value != before else {
                    throw CommandFailure(.failure, "the agent handed out no newer token")
                }
                lifetime = written.expiresAt.map { $0 - writtenAt }
                failures = 0
                if reported != nil {
                    Terminal.printError("vault exec: the command's token is fresh again")
                    reported = nil
                }
            } catch is CancellationError {
                return
            } catch {
                failures += 1
                failed(error)
            }
        }
    }

    /// When to ask the agent next and for how many seconds of validity (more than the token in
    /// the file has left then, which makes the agent refresh); nil: never (no expiry known).
    ///
    /// - `current`: the file's token's expiry and when it was written (nil: the file is empty);
    /// - `lifetime`: the provider's token lifetime, learned from a refresh (nil: not yet known,
    ///   and what the file's token has left is no measure of it: the agent may have held it
    ///   for most of its life);
    /// - `failures`: refreshes failed in a row (then retried with a backoff of 1, 2, 4, 8, then
    ///   10 s, and woken at the token's expiry to empty the file).
    static func schedule(
        current: (expiresAt: Double?, writtenAt: Double)?, lifetime: Double?, failures: Int, now: Double, minimumValidity: Int
    ) -> (wake: Double?, ask: Int) {
        let backoff = min(10, pow(2, Double(max(failures - 1, 0))))
        guard let current else { return (now + backoff, minimumValidity) }
        guard let expiry = current.expiresAt else { return (nil, minimumValidity) }
        let wake: Double
        if failures == 0 {
            let least = Double(minimumValidity)
            if let lifetime {
                // Never twice in a second, whatever a provider's very short tokens make the lead.
                wake = max(expiry - min(max(least, lifetime / 5), lifetime / 2), now + 1)
            } else {
                // A token with no more than the lead left is replaced at once.
                wake = max(expiry - max(least, (expiry - current.writtenAt) / 5), now)
            }
        } else {
            wake = min(now + backoff, max(expiry, now + 0.1))
        }
        return (wake, max(Int((expiry - wake).rounded(.up)) + 1, 1))
    }

    /// How long before its expiry a token that was not replaced leaves the file during a
    /// refresh: a command that reads it then has no time left to use it.
    static let expiryMargin: Double = 1

    /// Empties the file if it still holds `value` and that token expires within ``expiryMargin``.
    private func expire(_ value: String?) {
        guard let (token, _) = current, token.value == value, Self.expiry(token) <= now + Self.expiryMargin else { return }
        if (try? place.write("")) != nil { current = nil }
    }

    /// After a failed refresh: the file emptied when its token expired or the grant is gone,
    /// and the failure said once.
    private func failed(_ error: any Error) {
        let failure = CommandFailure.describing(error)
        let grantGone = failure.code == .sessionEnded
        if let (token, _) = current, grantGone || Self.expiry(token) <= now {
            if (try? place.write("")) != nil { current = nil }
        }
        let holds: String
        if let (token, _) = current, let expiry = token.expiry {
            holds = "the token file keeps the last token until it expires at \(expiry.formatted(.iso8601)), then is emptied"
        } else {
            holds = "the token file is empty"
        }
        let message = "vault exec: the command's token was not refreshed: \(failure.message); \(holds); retrying"
        if message != reported {
            Terminal.printError(message)
            reported = message
        }
    }

    /// The socket's answer for `path`.
    func reply(_ path: String) async -> ChildTokenServer.Reply {
        guard path == "/token" || path == "/token.json" else {
            return ChildTokenServer.Reply(status: 404, body: "ask GET /token or GET /token.json\n")
        }
        do {
            let token = try await fetch(minTTL: minimumValidity)
            guard path == "/token.json" else { return ChildTokenServer.Reply(status: 200, body: token.value) }
            let object: JSONValue = ["access_token": .string(token.value), "token_type": .string(token.type), "expires_at": .date(token.expiry)]
            return ChildTokenServer.Reply(status: 200, contentType: "application/json", body: object.rendered)
        } catch {
            let failure = CommandFailure.describing(error)
            return ChildTokenServer.Reply(status: 503, body: "no token: \(failure.message) (exit \(failure.code.rawValue))\n")
        }
    }

    private static func expiry(_ token: AgentToken) -> Double { token.expiresAt ?? .infinity }
}
