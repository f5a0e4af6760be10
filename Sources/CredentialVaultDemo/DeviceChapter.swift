import DevGateway
import Foundation
import Logging
import VaultSession
import VaultStore

/// The device-activation part of the story (device B approved from device A).
enum DeviceChapter {
    static func run(gateway: DevGateway, vault: Vault, session: SessionService, accounts: [String: AccountID],
                    policy: SessionPolicy, directory: URL, narrator: Narrator, logger: Logger) async throws {
        narrator.chapter("Device activation")
        narrator.say("not yet: device activation arrives with issue 4")
    }
}
