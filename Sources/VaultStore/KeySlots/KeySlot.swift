import Foundation
import VaultCrypto

/// One way into a vault (schema 16): slot 0 is the vault's own credential, kept in its header;
/// every other slot seals the header's derived secret under a key of its own (a key file, a key
/// a keeper holds, a second passphrase), so it opens exactly what slot 0 opens.
///
/// ```swift
/// for slot in try vault.keySlots.list() {
///     print(slot.id, slot.kind, slot.keeper ?? "-", slot.label)
/// }
/// ```
public struct KeySlot: Sendable, Hashable, Identifiable, CustomStringConvertible {
    /// How a slot's key is obtained.
    public enum Kind: String, Sendable, Hashable {
        /// A passphrase, stretched with Argon2id at the slot's own salt and cost.
        case passphrase = "argon2id13"
        /// 32 bytes: a key file's, or a keeper's.
        case key = "keyfile"
    }

    /// 0 for the header's own credential; slots added later count up and are never reused.
    public var id: Int64
    public var kind: Kind
    /// Who holds a key slot's key (`secret-service`, `systemd-creds`); nil for a key file or a
    /// passphrase. For slot 0 it is never known: the header does not say where its key is kept.
    public var keeper: String?
    /// What the slot is, for people: a key file's path, a keeper's description.
    public var label: String
    /// When the slot was added (the vault's creation for slot 0).
    public var createdAt: Date

    public init(id: Int64, kind: Kind, keeper: String?, label: String, createdAt: Date) {
        self.id = id
        self.kind = kind
        self.keeper = keeper
        self.label = label
        self.createdAt = createdAt
    }

    /// `slot 2 (secret-service: the desktop keyring)`, `slot 0 (the vault's passphrase)`. The
    /// keeper and label come from the file: control characters in them are shown as `?`, so an
    /// edited row cannot write terminal escapes into a message.
    public var description: String {
        let what = keeper.map { "\($0): \(label)" } ?? label
        return "slot \(id) (\(String(what.unicodeScalars.map { $0.properties.generalCategory == .control ? "?" : Character($0) })))"
    }

    /// The keepers a vault's slots name (slot 0 names none), in slot order, without repeats.
    public static func keepers(of slots: [KeySlot]) -> [String] {
        var seen: [String] = []
        for slot in slots { if let keeper = slot.keeper, !seen.contains(keeper) { seen.append(keeper) } }
        return seen
    }
}
