import ArgumentParser
import Foundation
import VaultStore

extension VaultCommand {
    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "devices",
            abstract: "List and revoke the devices registered with accounts.",
            subcommands: [List.self, Revoke.self])
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
                (try opened.vault.devices(for: try account.map { try opened.account($0) }), opened.vault.deviceID)
            }
            if output.json {
                print(JSONValue.array(devices.map { .device($0, thisDevice: thisDevice) }).rendered, terminator: "")
                return
            }
            guard !devices.isEmpty else { print("No devices."); return }
            for device in devices {
                var line = "\(device.deviceID == thisDevice ? "*" : " ") \(device.id)  \"\(device.name)\"  \(device.platform)  \(device.status.rawValue)"
                if let reason = device.statusReason { line += " (\(reason))" }
                line += "  account \(device.account)"
                print(line)
            }
        }
    }

    struct Revoke: AsyncParsableCommand, VaultSubcommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke",
            abstract: "Mark a device registration revoked in the vault.",
            discussion: "Records the revocation locally (status revoked, with the reason); it does not contact the identity service.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var credentials: CredentialOptions
        @Argument(help: ArgumentHelp("The registration id (`vault devices list`).", valueName: "registration-id"))
        var registration: String
        @Option(help: "Why, recorded with the revocation.")
        var reason = "revoked by administrator"

        func run() async throws {
            let device = try await OpenedVault.with(global, credentials) { opened in
                guard var device = try opened.vault.device(registration) else {
                    throw CommandFailure(.noRecord, "no device registration \(registration): `vault devices list` shows them")
                }
                device.status = .revoked
                device.statusReason = reason
                device.updatedAt = Date()
                try opened.vault.saveDevice(device)
                return device
            }
            print("Revoked device registration \(device.id) of account \(device.account).")
        }
    }
}
