import Foundation
import VaultSync

/// A value that tasks can wait on: ``wait(upTo:until:)`` returns as soon as a change makes
/// the condition true, or false once `timeout` of real time passed. The timeout is only a
/// bound so a broken test fails instead of hanging; nothing waits for time to pass.
///
/// ```swift
/// let lines = Watched<[String]>([])
/// lines.update { $0.append("ready") }                         // from a reader thread
/// let ready = await lines.wait { $0.contains("ready") }        // in the test
/// ```
public final class Watched<Value: Sendable>: Sendable {
    private struct Waiter {
        let condition: @Sendable (Value) -> Bool
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct Box {
        var value: Value
        var waiters: [UUID: Waiter] = [:]
        var expired: Set<UUID> = []
    }

    private let box: Locked<Box>

    public init(_ value: Value) {
        box = Locked(Box(value: value))
    }

    public var value: Value { box.withLock { $0.value } }

    public func update(_ change: (inout Value) -> Void) {
        let ready = box.withLock { box -> [Waiter] in
            change(&box.value)
            let satisfied = box.waiters.filter { $0.value.condition(box.value) }.map(\.key)
            return satisfied.compactMap { box.waiters.removeValue(forKey: $0) }
        }
        ready.forEach { $0.continuation.resume(returning: true) }
    }

    /// Waits until `condition` holds; false when it still does not after `timeout`.
    @discardableResult
    public func wait(upTo timeout: Duration = TestTimeScale.scaled(.seconds(10)), until condition: @escaping @Sendable (Value) -> Bool) async -> Bool {
        let id = UUID()
        let bound = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            guard !Task.isCancelled else { return }
            self?.expire(id)
        }
        defer { bound.cancel() }
        return await withCheckedContinuation { continuation in
            let answer = box.withLock { box -> Bool? in
                if condition(box.value) { return true }
                if box.expired.remove(id) != nil { return false }
                box.waiters[id] = Waiter(condition: condition, continuation: continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    private func expire(_ id: UUID) {
        let waiter = box.withLock { box -> Waiter? in
            guard let waiter = box.waiters.removeValue(forKey: id) else {
                box.expired.insert(id)
                return nil
            }
            return waiter
        }
        waiter?.continuation.resume(returning: false)
    }
}
