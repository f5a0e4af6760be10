import ArgumentParser
import Foundation
import Logging
import VaultOAuth
import VaultSession
import VaultStore

/// Where an account's device and notification API lives: `--api URL`, else the
/// `device_api_endpoint` its sign-in's provider metadata named.
struct DeviceAPIOptions: ParsableArguments {
    @Option(
        name: .customLong("api"),
        help: ArgumentHelp(
            "The identity service's device API (default: the one its metadata named at sign-in).", valueName: "url"))
    var api: String?

    /// The API client for `account`, its URL checked by the endpoint rule with the account's pins.
    func client(for account: AccountID, in opened: OpenedVault, global: GlobalOptions) throws -> HTTPDeviceNotificationAPI {
        guard let stored = try opened.vault.accounts.find(account) else {
            throw CommandFailure(.noRecord, "no account \(account) in the vault")
        }
        let named = api ?? stored.providerMetadata.flatMap(ProviderMetadata.decoded)?.deviceAPIEndpoint?.absoluteString
        guard let text = named else {
            throw CommandFailure(
                .usage, "no device API is known for account \(account): pass --api URL, or sign in with `vault login` so the provider's metadata names one")
        }
        guard let url = URL(string: text), url.scheme != nil, url.host != nil else {
            throw CommandFailure(.usage, "--api \(text) is not an absolute URL")
        }
        try EndpointRule.check(url, role: "device API", pins: try SPKIPin.parse(stored.client.pins))
        // The same transport as the sign-in's: its CA file and proxy.
        return HTTPDeviceNotificationAPI(
            baseURL: url, session: opened.session, transport: opened.session.transport, logger: global.logger("credentialvault.devices.http"))
    }
}

extension DeviceAPIError {
    /// The exit code a device or notification command ends with.
    var exitStatus: ExitStatus {
        switch self {
        case .deviceRevoked, .unauthorized: .sessionEnded
        case .notFound: .noRecord
        case .unreachable: .serverUnavailable
        case .refusedEndpoint: .usage
        case .pinningFailed: .pinningFailed
        default: .clientRefused
        }
    }
}
