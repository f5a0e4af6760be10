import Foundation

/// The id of an account in a vault: a random UUID, lowercase.
public struct AccountID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public static func < (lhs: AccountID, rhs: AccountID) -> Bool { lhs.rawValue < rhs.rawValue }

    static func random() -> AccountID { AccountID(rawValue: UUID().uuidString.lowercased()) }
}
