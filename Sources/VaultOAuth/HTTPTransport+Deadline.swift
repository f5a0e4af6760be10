/// A total deadline for any transport.
///
/// Transports bound a request by an *idle* timeout at most (`URLSession` restarts its timer at
/// every byte), so a server that answers one byte every 1.5 s holds a request open for as long
/// as it likes. While a refresh is in flight the refresh token is spoken for: a request that
/// outlives the refresh lease lets another process present the same token, which a server with
/// reuse detection (RFC 9700 §4.14.2) answers by revoking the whole grant. Every token,
/// revocation and device request therefore goes through ``HTTPTransport/send(_:deadline:clock:)``.
extension HTTPTransport {
    /// Sends `request` and gives up with ``TransportError/timedOut`` once `deadline` has passed
    /// on `clock`, however the server paces its answer.
    ///
    /// At the deadline the request's task is cancelled and this call returns only after the
    /// transport gave up (both of this package's transports close the connection on
    /// cancellation), so when it throws, nothing of the request is still in flight. A transport
    /// must therefore honour cancellation (``HTTPTransport``).
    ///
    /// ```swift
    /// let response = try await transport.send(request, deadline: .seconds(30), clock: ContinuousClock())
    /// ```
    public func send(_ request: HTTPRequest, deadline: Duration, clock: any Clock<Duration>) async throws -> HTTPResponse {
        try await withDeadline(deadline, clock: clock) { try await self.send(request) }
    }
}

/// Runs `operation`, cancelling it and throwing ``TransportError/timedOut`` once `deadline` has
/// passed on `clock`. Returns (or throws) only after `operation` has finished.
func withDeadline<Value: Sendable>(
    _ deadline: Duration, clock: any Clock<Duration>,
    _ operation: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    try await withThrowingTaskGroup(of: Value?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await clock.sleep(for: deadline)
            return nil  // the deadline passed first
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let result = first else {
            throw TransportError.timedOut
        }
        return result
    }
}
