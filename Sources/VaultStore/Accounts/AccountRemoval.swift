/// What ``AccountStore/remove(_:checkpointWait:)`` did: whether an account was removed,
/// which account is active afterwards (chosen in the same transaction as the delete), and
/// whether the checkpoint that clears the removed data from the disk completed.
///
/// ```swift
/// let removal = try vault.accounts.remove(id)
/// if removal.active != removal.previousActive { print("now active: \(removal.active.map(\.rawValue) ?? "none")") }
/// if removal.checkpoint?.isComplete == false { print("run `vault compact` when the other process is done") }
/// ```
public struct AccountRemoval: Sendable, Hashable {
    /// The account asked for.
    public var account: AccountID
    /// Whether there was such an account (false: nothing was changed).
    public var removed: Bool
    /// The active account before the removal.
    public var previousActive: AccountID?
    /// The active account after it: unchanged, or, when the removed account was active, the
    /// oldest remaining account (nil when none is left).
    public var active: AccountID?
    /// How the checkpoint after the delete ended; nil when nothing was removed.
    public var checkpoint: WALCheckpoint?

    public init(account: AccountID, removed: Bool, previousActive: AccountID?, active: AccountID?, checkpoint: WALCheckpoint?) {
        self.account = account
        self.removed = removed
        self.previousActive = previousActive
        self.active = active
        self.checkpoint = checkpoint
    }
}
