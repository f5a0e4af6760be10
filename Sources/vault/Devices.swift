import ArgumentParser
import Foundation
import VaultSession
import VaultStore

extension VaultCommand {
    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "devices",
            abstract: "List, sync, activate, rename and revoke the devices of accounts.",
            subcommands: [List.self, Sync.self, Activate.self, Rename.self, Revoke.self])
    }
}

extension VaultCommand.Devices {
    struct List: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List device registrations (this install marked with *).")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @Option(help: ArgumentHelp("Only this account's devices. " + AccountReference.help, valueName: "account"))
        var account: String?

        func run() async throws {
            let (devices, thisDevice) = try await OpenedVault.with(global, credentials) { opened in
                (try opened.vault.devices.all(for: try account.map { try opened.account($0) }), opened.vault.deviceID)
            }
            if output.json {
                print(JSONValue.array(devices.map { .device($0, thisDevice: thisDevice) }).rendered, terminator: "")
                return
            }
            guard !devices.isEmpty else {
                print("No devices.")
                return
            }
            for device in devices {
                var line =
                    "\(device.deviceID == thisDevice ? "*" : " ") \(Terminal.printable(device.id))  \"\(Terminal.printable(device.name))\"  "
                    + "\(Terminal.printable(device.platform))  \(device.status.rawValue)"
                if let reason = device.statusReason { line += " (\(Terminal.printable(reason)))" }
                line += "  account \(device.account)"
                print(line)
            }
        }
    }

    struct Sync: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "sync",
            abstract: "Fetch the account's device roster from the identity service into the vault.",
            discussion: "Every device the server knows is stored (other devices with this_device false); the server's statuses are kept as it says them.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var output: OutputOptions
        @OptionGroup var device: DeviceAPIOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?

        func run() async throws {
            let (devices, thisDevice) = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                let roster = DeviceRoster(session: opened.session, api: try device.client(for: id, in: opened, global: global))
                return (try await roster.refresh(account: id), opened.vault.deviceID)
            }
            if output.json {
                print(JSONValue.array(devices.map { .device($0, thisDevice: thisDevice) }).rendered, terminator: "")
                return
            }
            print("\(devices.count) device\(devices.count == 1 ? "" : "s") of the account:")
            for device in devices { print(Self.line(device, thisDevice: thisDevice)) }
        }

        static func line(_ device: DeviceRegistration, thisDevice: String) -> String {
            var line =
                "\(device.deviceID == thisDevice ? "*" : " ") \(Terminal.printable(device.deviceID))  \"\(Terminal.printable(device.name))\"  "
                + "\(Terminal.printable(device.platform))  \(device.status.rawValue)"
            if let reason = device.statusReason { line += " (\(Terminal.printable(reason)))" }
            if let last = device.lastActivityAt { line += "  last active \(Format.iso8601(last))" }
            return line
        }
    }

    struct Activate: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "activate",
            abstract: "Register this machine as a device of the account and activate it.",
            discussion: """
                The account's first device is active at once. Any later one waits for an approval \
                from an active device (`vault notifications answer UUID approve` there), with a live \
                countdown; --fallback asks for the activation code the identity service sends out of \
                band instead. Ctrl-C cancels the activation at the server.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var device: DeviceAPIOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Option(help: "This device's name, as other devices will see it (not needed with --resume).")
        var name: String?
        @Flag(help: "Ask for the activation code instead of waiting for an approval.")
        var fallback = false
        @Flag(
            help: ArgumentHelp(
                "Continue this device's pending activation instead of registering again.",
                discussion:
                    "The approval request and its deadline are stored in the vault: a wait interrupted by a crash, a reboot or a closed terminal goes on until the same deadline, and an approval given meanwhile is seen at once."
            ))
        var resume = false

        func validate() throws {
            if let name {
                try DeviceName.check(name, "--name")
            } else if !resume {
                throw ValidationError("--name is required (or --resume, to continue a pending activation)")
            }
        }

        func run() async throws {
            let outcome = try await OpenedVault.with(global, credentials) { opened -> String in
                let id = try opened.account(account)
                let who = opened.name(of: id)
                let activation = DeviceActivation(
                    session: opened.session, api: try device.client(for: id, in: opened, global: global),
                    logger: global.logger("credentialvault.devices"))
                if resume {
                    if let settled = try await Self.resumable(activation, id, who) { return settled }
                } else if let name {
                    switch try await activation.register(account: id, name: name) {
                    case .active(let registration):
                        return "This device is active for \(who) (\(registration.activationMethod?.rawValue ?? "primary"))."
                    case .pending(let registration, _):
                        if let approval = registration.pendingApproval, !fallback { Self.continuing(approval) }
                    }
                }
                let ended: ActivationOutcome
                do {
                    ended = try await Interruptible.run { [fallback] in
                        if fallback { return try await Self.byCode(activation, id) }
                        return try await Self.byApproval(activation, id)
                    }
                } catch let failure as CommandFailure where failure.code == .interrupted {
                    _ = try? await activation.cancel(account: id)
                    throw CommandFailure(.interrupted, "interrupted; the activation was cancelled at the server")
                }
                switch ended {
                case .activated(let registration):
                    return "This device is active for \(who) (\(registration.activationMethod?.rawValue ?? "approved"))."
                case .rejected(let registration):
                    throw CommandFailure(.signInDeclined, "the activation was rejected\(registration.statusReason.map { ": \(Terminal.printable($0))" } ?? "")")
                case .expired(let registration):
                    throw CommandFailure(.signInTimedOut, "the activation expired\(registration.statusReason.map { ": \(Terminal.printable($0))" } ?? "")")
                case .cancelled:
                    throw CommandFailure(.interrupted, "the activation was cancelled")
                }
            }
            print(outcome)
        }

        /// Nil when there is a pending activation to continue; the answer when it already ended well.
        static func resumable(_ activation: DeviceActivation, _ id: AccountID, _ who: String) async throws -> String? {
            guard let registration = try await activation.registration(account: id) else {
                throw CommandFailure(.noRecord, "this device has no activation to resume with \(who): `vault devices activate --name NAME` starts one")
            }
            switch registration.status {
            case .pending:
                if let approval = registration.pendingApproval { continuing(approval) }
                return nil
            case .active:
                return "This device is already active for \(who)."
            case .rejected, .expired, .revoked:
                throw CommandFailure(
                    .noRecord,
                    "this device's activation with \(who) ended (\(registration.status.rawValue)"
                        + "\(registration.statusReason.map { ": \(Terminal.printable($0))" } ?? "")): "
                        + "`vault devices activate --name NAME` starts a new one")
            }
        }

        static func continuing(_ approval: PendingApproval) {
            Terminal.printError("Continuing the approval request sent at \(Format.iso8601(approval.requestedAt)).")
        }

        /// Waits for an active device to approve, showing the countdown on standard error.
        static func byApproval(_ activation: DeviceActivation, _ id: AccountID) async throws -> ActivationOutcome {
            let events = activation.events()
            let reporter = Task {
                var lastShown = Int.max
                for await event in events {
                    switch event {
                    case .approvalRequested(_, _, let deadline):
                        Terminal.printError(
                            "Waiting for an active device of the account to approve (until \(Format.iso8601(deadline))): "
                                + "there, `vault notifications sync` and `vault notifications answer UUID approve`.")
                    case .waitingForApproval(_, let secondsLeft) where secondsLeft / 30 != lastShown / 30:
                        lastShown = secondsLeft
                        Terminal.printError("  \(Format.span(TimeInterval(secondsLeft))) left")
                    default:
                        continue
                    }
                }
            }
            defer { reporter.cancel() }
            return try await activation.verify(account: id)
        }

        /// Starts the fallback and asks for the code on the terminal (or reads it from standard input).
        static func byCode(_ activation: DeviceActivation, _ id: AccountID) async throws -> ActivationOutcome {
            let challenge = try await activation.startFallback(account: id)
            while true {
                Terminal.printError("Enter the activation code sent by \(Terminal.printable(challenge.method)) to \(Terminal.printable(challenge.delivery)):")
                guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                    throw CommandFailure(.usage, "no activation code was entered")
                }
                do {
                    return try await activation.activate(with: ActivationCode(line.trimmingCharacters(in: .whitespaces)), account: id)
                } catch DeviceAPIError.invalidActivationCode(let left, let status) where status != .rejected {
                    Terminal.printError("That code is wrong\(left.map { "; \($0) attempt(s) left" } ?? "").")
                }
            }
        }
    }

    struct Rename: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "rename", abstract: "Rename a device of the account at the identity service.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var device: DeviceAPIOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Argument(help: ArgumentHelp("The device id (`vault devices sync` lists them).", valueName: "device-id"))
        var deviceID: String
        @Argument(help: "The new name.")
        var name: String

        func validate() throws { try DeviceName.check(name, "the name") }

        func run() async throws {
            let renamed = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                let roster = DeviceRoster(session: opened.session, api: try device.client(for: id, in: opened, global: global))
                return try await roster.rename(deviceID: deviceID, to: name, account: id)
            }
            print("Renamed device \(Terminal.printable(renamed.deviceID)) to \"\(Terminal.printable(renamed.name))\".")
        }
    }

    struct Revoke: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke",
            abstract: "Revoke a device of the account at the identity service (this one included).",
            discussion: """
                Revoking this device ends its session (expired, device_revoked) and wipes its tokens. \
                --local only marks a registration revoked in the vault, telling no server (for a \
                vault whose identity service is gone).
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @OptionGroup var device: DeviceAPIOptions
        @Option(help: ArgumentHelp("The account (default: the active one). " + AccountReference.help, valueName: "account"))
        var account: String?
        @Argument(
            help: ArgumentHelp(
                "The device id (`vault devices sync`), or with --local the registration id (`vault devices list`).",
                valueName: "device-id"))
        var registration: String
        @Flag(help: "Only record the revocation in the vault; no server is told.")
        var local = false
        @Option(help: "Why, recorded with a --local revocation.")
        var reason = "revoked by administrator"

        func run() async throws {
            if local { return try await revokeLocally() }
            let (revoked, itself) = try await OpenedVault.with(global, credentials) { opened in
                let id = try opened.account(account)
                let roster = DeviceRoster(session: opened.session, api: try device.client(for: id, in: opened, global: global))
                return (try await roster.revoke(deviceID: registration, account: id), registration == opened.vault.deviceID)
            }
            print(
                "Revoked device \(Terminal.printable(revoked.deviceID)) (\"\(Terminal.printable(revoked.name))\") at the identity service"
                    + (itself ? "; it was this device: its session ended and its tokens were wiped." : "."))
        }

        func revokeLocally() async throws {
            let device = try await OpenedVault.with(global, credentials) { opened in
                guard var device = try opened.vault.devices.find(registration) else {
                    throw CommandFailure(.noRecord, "no device registration \(registration): `vault devices list` shows them")
                }
                device.status = .revoked
                device.statusReason = reason
                device.updatedAt = opened.vault.wallClock.now()
                try opened.vault.devices.save(device)
                return (device, opened.name(of: device.account))
            }
            print("Revoked device registration \(Terminal.printable(device.0.id)) of \(device.1) in the vault (no server was told).")
        }
    }
}

/// A device name as other devices will show it: 1 to 100 characters, none of them a control
/// character (an escape sequence in a name would reach every terminal that lists it).
enum DeviceName {
    static func check(_ name: String, _ what: String) throws {
        guard !name.isEmpty, name.count <= 100, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ValidationError("\(what) takes 1 to 100 characters, no control characters")
        }
    }
}
