// libFuzzer target: the device API's notification parsing (VaultSession/Devices/
// HTTPDeviceNotificationAPI+Wire.swift: a page, one notification, a failure body) on arbitrary
// bodies, decoded as HTTPDeviceNotificationAPI decodes them. Built by Fuzz/run.sh.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let data = start.map { Data(bytes: $0, count: count) } ?? Data()
    let decoder = JSONDecoder()
    if let page = try? decoder.decode(WireNotificationPage.self, from: data) {
        for wire in page.notifications {
            if let notification = try? wire.value() {
                precondition(notification.uuid == wire.notificationUUID)
                precondition(notification.actions.count == wire.actions.count)
            }
        }
    }
    if let one = try? decoder.decode(WireOneNotification.self, from: data) {
        _ = try? one.notification.value()
    }
    if let failure = try? decoder.decode(WireFailure.self, from: data) {
        _ = failure.answeredAt.map(Date.init(milliseconds:))
        _ = failure.expiredAt.map(Date.init(milliseconds:))
    }
    return 0
}
