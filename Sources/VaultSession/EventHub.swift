import Foundation
import VaultSync

/// Fans events out to every subscriber's `AsyncStream`. Subscribers that stop listening
/// are dropped when their stream terminates.
final class EventHub: Sendable {
    private let subscribers = Locked<[UUID: AsyncStream<SessionEvent>.Continuation]>([:])

    func subscribe() -> AsyncStream<SessionEvent> {
        let (stream, continuation) = AsyncStream<SessionEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        subscribers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func emit(_ event: SessionEvent) {
        let continuations = subscribers.withLock { Array($0.values) }
        for continuation in continuations { continuation.yield(event) }
    }

    func finish() {
        let continuations = subscribers.withLock { subscribers in
            defer { subscribers.removeAll() }
            return Array(subscribers.values)
        }
        for continuation in continuations { continuation.finish() }
    }
}
