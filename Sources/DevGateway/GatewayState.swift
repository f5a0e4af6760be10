/// Everything the gateway remembers, one property per area.
///
/// Add an area (devices, notifications) as another property with its own state type and
/// file, handled by its own `DevGateway+Area.swift` extension.
struct GatewayState: Sendable {
    /// Clients, grants and tokens.
    var tokens = TokenLedger()
    /// Injected failures and latency.
    var faults = FaultPlan()
    /// Counters for tests.
    var stats = GatewayStats()
    /// Device registrations, grant bindings and fallback codes.
    var devices = DeviceLedger()
    /// Notifications and their answers.
    var notifications = NotificationLedger()
    /// The device area's clock offset, approval lifetime and request log.
    var deviceArea = DeviceAreaSettings()
}
