import Foundation
import VaultStore
import VaultTestSupport

@testable import VaultSession

/// Everything one subscriber of ``SessionService/events()`` received, in order, with
/// bounded waits for the next matching event.
///
/// ```swift
/// let events = EventLog(service)
/// await time.advance(by: .seconds(14 * 60))
/// let warning = await events.next { if case .idleWarning = $0 { true } else { false } }
/// ```
final class EventLog: Sendable {
    private let received = Watched<[SessionEvent]>([])
    private let reader: Task<Void, Never>
    private let service: SessionService

    init(_ service: SessionService) {
        self.service = service
        let received = self.received
        let stream = service.events()
        reader = Task {
            for await event in stream { received.update { $0.append(event) } }
        }
    }

    deinit { reader.cancel() }

    /// Every event so far (flush markers left out).
    var all: [SessionEvent] { received.value.filter { !$0.isFlushMarker } }

    /// A position in the log: `next(after:)` only looks at events received after it.
    var mark: Int { received.value.count }

    /// The first event at or after position `mark` that matches, waiting for it if needed.
    func next(
        after mark: Int = 0, timeout: Duration = TestTimeScale.scaled(.seconds(10)),
        where matches: @escaping @Sendable (SessionEvent) -> Bool
    ) async -> SessionEvent? {
        let found = await received.wait(upTo: timeout) { $0.dropFirst(mark).contains(where: matches) }
        guard found else { return nil }
        return received.value.dropFirst(mark).first(where: matches)
    }

    /// Events at or after `mark` that match (no waiting).
    func events(after mark: Int = 0, where matches: (SessionEvent) -> Bool) -> [SessionEvent] {
        received.value.dropFirst(mark).filter { !$0.isFlushMarker && matches($0) }
    }

    /// Returns once every event the service emitted before this call has been received: a
    /// marker goes through the service's own event hub behind them.
    func flush() async -> Bool {
        let marker = SessionEvent.flushMarker()
        service.hub.emit(marker)
        return await received.wait { $0.contains(marker) }
    }
}

extension SessionEvent {
    fileprivate static func flushMarker() -> SessionEvent {
        .refreshFailed(AccountID(rawValue: "flush-marker-\(UUID().uuidString)"), reason: "flush", retryAt: nil)
    }

    fileprivate var isFlushMarker: Bool {
        if case .refreshFailed(let account, "flush", nil) = self, account.rawValue.hasPrefix("flush-marker-") { return true }
        return false
    }

    // Matchers for the cases tests look for.

    var idleWarning: IdleWarning? {
        if case .idleWarning(let warning) = self { return warning }
        return nil
    }

    var refreshFailure: (account: AccountID, reason: String, retryAt: Date?)? {
        if case .refreshFailed(let account, let reason, let retryAt) = self, !isFlushMarker { return (account, reason, retryAt) }
        return nil
    }

    var isIdleWarning: Bool { idleWarning != nil }

    var extensionResult: ExtensionResult? {
        if case .extensionResult(_, let result) = self { return result }
        return nil
    }

    var isTokenRefreshed: Bool {
        if case .tokenRefreshed = self { return true }
        return false
    }

    var isRevoked: Bool {
        if case .revoked = self { return true }
        return false
    }
}
