import Foundation
import VaultSync

/// Fans values out to every subscriber's `AsyncStream` (the session service's events, a device
/// activation's progress); a subscriber that stops listening is dropped when its stream
/// terminates, and keeps the newest 256 values it has not read yet.
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

    /// Ends every subscriber's stream.
    func finish() {
        let continuations = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
