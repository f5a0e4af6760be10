import Foundation
import VaultSync

/// Fans values out to every subscriber's `AsyncStream`; a subscriber that stops listening is
/// dropped when its stream terminates.
final class Broadcast<Event: Sendable>: Sendable {
    private let subscribers = Locked<[UUID: AsyncStream<Event>.Continuation]>([:])

    func subscribe() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func emit(_ event: Event) {
        for continuation in subscribers.withLock({ Array($0.values) }) { continuation.yield(event) }
    }
}
