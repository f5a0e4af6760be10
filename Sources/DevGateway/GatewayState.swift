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
    /// Who may introspect tokens (RFC 7662).
    var introspection = IntrospectionAccess.anyClient
    /// Device registrations, grant bindings and fallback codes.
    var devices = DeviceLedger()
    /// Notifications and their answers.
    var notifications = NotificationLedger()
    /// The device area's clock offset, approval lifetime and request log.
    var deviceArea = DeviceAreaSettings()
    /// ID-token signing keys, current and published.
    var signingKeys = SigningKeyRing()
    /// The browser session, each subject's last authentication, authorization codes.
    var authorization = AuthorizationLedger()
    /// Device codes of the device authorization grant.
    var deviceGrants = DeviceGrantLedger()
    /// Guest conversions.
    var guests = GuestLedger()
    /// The sign-in clock, discovery settings and guest conversion switch.
    var signIn = SignInSettings()
    /// The resource servers that `resource` (RFC 8707) may name; set to the defaults for the
    /// gateway's address when it starts.
    var resources = ResourceServers()
    /// Clients of the client credentials grant, their credentials, and used client assertions.
    var serviceClients = ServiceClientRegistry()
    /// DPoP (RFC 9449): whether proofs and nonces are required, the nonce, used proofs.
    var dpop = DPoPLedger()
}
