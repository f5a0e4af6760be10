import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand.Accounts {
    struct SetPolicy: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "set-policy",
            abstract: "Change an account's session policy; its open session's deadlines follow at once.",
            discussion: """
                Only the options given change; the others keep their stored values. Durations are \
                90s, 15m, 12h or 30d; `none` turns a timeout off.

                --activity any (the default) counts every token served as activity, so a script or \
                daemon that asks for tokens keeps its session; --activity interactive counts only \
                what a tool reports as the user's own activity, so the session idles out while the \
                person is away however often the tool polls.

                --lifetime none removes the absolute lifetime: the session then lasts as long as its \
                grant. The risk: whoever gets the vault unlocked (its passphrase or key file) gets \
                tokens until the grant is revoked at the identity service.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Option(help: ArgumentHelp("Lock (or end) the session after this much inactivity, or `none`.", valueName: "duration"))
        var idleTimeout: TimeLimit?
        @Option(help: ArgumentHelp("End the session this long after sign-in whatever the activity, or `none`.", valueName: "duration"))
        var lifetime: TimeLimit?
        @Option(help: ArgumentHelp("Lock the session after this long in the background, or `none`.", valueName: "duration"))
        var backgroundTimeout: TimeLimit?
        @Option(help: ArgumentHelp("Warn this long before the idle timeout.", valueName: "duration"))
        var warning: TimeLimit?
        @Option(help: ArgumentHelp("How many times a session may be extended after a warning.", valueName: "count"))
        var maxExtensions: Int?
        @Option(
            help: ArgumentHelp(
                "What the idle timeout does: lock (resume with `vault sessions unlock`) or expire (sign in again).",
                valueName: "lock|expire"))
        var idleAction: SessionPolicy.IdleAction?
        @Option(help: ArgumentHelp("Which uses count as activity: any (every token served) or interactive.", valueName: "any|interactive"))
        var activity: SessionPolicy.Activity?
        @Option(
            help: ArgumentHelp(
                "Let a sensitive action (`vault token --sensitive`) move the absolute deadline to now + the lifetime, never past sign-in + this; `none`: a sensitive action is only activity.",
                valueName: "duration"))
        var sensitiveCap: TimeLimit?
        @Option(
            help: ArgumentHelp(
                "How long the provider lets the account's refresh tokens live from sign-in, when nothing else says (the agent warns before it); `none`: not known.",
                valueName: "duration"))
        var refreshLifetime: TimeLimit?

        func validate() throws {
            if case .unlimited? = warning { throw ValidationError("--warning needs a duration such as 60s (0 warnings: use --warning 1s)") }
            if let maxExtensions, maxExtensions < 0 { throw ValidationError("--max-extensions must not be negative") }
            if [idleTimeout, lifetime, backgroundTimeout, warning, sensitiveCap, refreshLifetime].allSatisfy({ $0 == nil }), maxExtensions == nil,
                idleAction == nil, activity == nil
            {
                throw ValidationError(
                    "nothing to change: give at least one of --idle-timeout, --lifetime, --background-timeout, --warning, --max-extensions, --idle-action, --activity, --sensitive-cap, --refresh-lifetime"
                )
            }
        }

        func run() async throws {
            let (id, policy, name) = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                var policy = try await opened.session.sessionPolicy(for: id)
                if let idleTimeout { policy.idleTimeout = idleTimeout.duration }
                if let lifetime { policy.absoluteLifetime = lifetime.duration }
                if let backgroundTimeout { policy.backgroundTimeout = backgroundTimeout.duration }
                if let warning, let duration = warning.duration { policy.warningBefore = duration }
                if let maxExtensions { policy.maxExtensions = maxExtensions }
                if let idleAction { policy.idleAction = idleAction }
                if let activity { policy.activity = activity }
                if let sensitiveCap { policy.sensitiveActionCap = sensitiveCap.duration }
                if let refreshLifetime { policy.refreshTokenLifetime = refreshLifetime.duration }
                // A shorter idle timeout than the stored warning: the warning comes at half of it.
                if warning == nil, let idle = policy.idleTimeout, policy.warningBefore >= idle { policy.warningBefore = idle / 2 }
                do {
                    try await opened.session.setSessionPolicy(policy, for: id)
                } catch SessionError.vault(let error) where error.code == .invalidArgument {
                    throw CommandFailure(.usage, error.message)
                }
                return (id, policy, opened.name(of: id))
            }
            if output.json {
                print(JSONValue.object([("account", .string(id.rawValue)), ("policy", JSONValue.policy(policy))]).rendered, terminator: "")
            } else {
                print("Changed the session policy of \(name): \(Format.policy(policy)).")
            }
        }
    }
}

extension SessionPolicy.IdleAction: ExpressibleByArgument {}
extension SessionPolicy.Activity: ExpressibleByArgument {}

extension Format {
    /// A policy in one line, as `accounts show` and `accounts set-policy` print it.
    static func policy(_ policy: SessionPolicy) -> String {
        "idle timeout \(policy.idleTimeout.map(span) ?? "none") (then \(policy.idleAction.rawValue)), "
            + "lifetime \(policy.absoluteLifetime.map(span) ?? "none"), "
            + "background timeout \(policy.backgroundTimeout.map(span) ?? "none"), "
            + "activity: \(policy.activity == .any ? "any token use" : "interactive use only")"
            + (policy.sensitiveActionCap.map { ", a sensitive action extends it up to \(span($0)) after sign-in" } ?? "")
            + (policy.refreshTokenLifetime.map { ", refresh tokens live \(span($0))" } ?? "")
    }
}
