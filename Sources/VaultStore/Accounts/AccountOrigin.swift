import Foundation

/// Whether an export hands over the whole grant or only the access token.
public enum SessionTransferMode: String, Sendable, Hashable, Codable {
    /// The grant moves: the exporting vault wipes its tokens and ends its session (`exported`).
    case move
    /// Only the access token and its expiry go; the exporting vault keeps the grant.
    case accessOnly = "access_only"
}

/// Where an imported account came from (`accounts.origin`, schema 7).
public struct AccountOrigin: Sendable, Hashable, Codable {
    /// The transfer that brought it.
    public var transfer: String
    public var importedAt: Date
    public var mode: SessionTransferMode
    /// The exporting machine's host name and vault recipient fingerprint, as the blob claims them.
    public var host: String?
    public var vault: String

    public init(transfer: String, importedAt: Date, mode: SessionTransferMode, host: String?, vault: String) {
        self.transfer = transfer
        self.importedAt = importedAt
        self.mode = mode
        self.host = host
        self.vault = vault
    }

    private enum CodingKeys: String, CodingKey { case kind, transfer, at, mode, host, vault }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        guard try c.decode(String.self, forKey: .kind) == "imported" else {
            throw DecodingError.dataCorruptedError(forKey: .kind, in: c, debugDescription: "unknown origin kind")
        }
        transfer = try c.decode(String.self, forKey: .transfer)
        importedAt = Date(millisecondsSince1970: try c.decode(Int64.self, forKey: .at))
        mode = try c.decode(SessionTransferMode.self, forKey: .mode)
        host = try c.decodeIfPresent(String.self, forKey: .host)
        vault = try c.decode(String.self, forKey: .vault)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode("imported", forKey: .kind)
        try c.encode(transfer, forKey: .transfer)
        try c.encode(importedAt.millisecondsSince1970, forKey: .at)
        try c.encode(mode, forKey: .mode)
        try c.encodeIfPresent(host, forKey: .host)
        try c.encode(vault, forKey: .vault)
    }
}
