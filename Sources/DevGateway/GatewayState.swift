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
}
