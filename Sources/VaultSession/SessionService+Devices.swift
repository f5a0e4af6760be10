import Foundation
import Logging
import VaultOAuth
import VaultStore

// MARK: - Devices: the server revoked this device

extension SessionService {
    /// The account's SPKI pins, for requests made on its behalf (``HTTPDeviceNotificationAPI``).
    /// The account's pins and the PEM bundle its provider chains to (if any), from one read of
    /// its (authenticated) row.
    func serverTrust(for account: AccountID) async throws -> (pins: [SPKIPin], caFile: String?) {
        guard let stored = try await vaultCall({ [vault] in try vault.accounts.find(account) }) else { throw SessionError.notSignedIn(account) }
        return (try pins(of: stored), stored.client.caFile)
    }

    /// The identity service reported this device revoked for `account`: the session ends as
    /// expired(device revoked) with its tokens wiped (one transaction, like a revoked grant),
    /// and this device's registration is marked revoked. Returns the error to throw.
    func deviceWasRevoked(_ account: AccountID) async -> SessionError {
        do {
            broker.cancelRefresh(of: account)
            if try await applyExpiry(account, reason: .deviceRevoked, timedOut: false) {
                logger.notice("the identity service revoked this device; tokens wiped", metadata: ["account": "\(account)"])
            }
        } catch {
            logger.error("could not end the session of a revoked device", metadata: ["account": "\(account)", "error": "\(error)"])
        }
        // The registration's name is sealed: while the vault is locked it cannot be rewritten,
        // and the next sync of the devices screen records the revocation instead.
        let vault = self.vault
        if var device = try? await vaultCall({ try vault.devices.all(for: account).first(where: { $0.deviceID == vault.deviceID }) }),
            device.status != .revoked
        {
            device.status = .revoked
            device.statusReason = "revoked by the identity service"
            device.updatedAt = now()
            do {
                try await vaultCall { [device] in try vault.devices.save(device) }
            } catch {
                logger.debug("could not mark this device revoked", metadata: ["account": "\(account)", "error": "\(error)"])
            }
        }
        return .expired(account, .deviceRevoked)
    }
}
