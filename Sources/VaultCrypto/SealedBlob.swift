/// The on-disk layout of a sealed field, version 1:
///
/// ```
/// offset  size  field
/// 0       1     format version (1)
/// 1       4     key id, big-endian: which key sealed it
/// 5       24    XChaCha20 nonce (random)
/// 29      n+16  ciphertext followed by the Poly1305 tag
/// ```
///
/// The first five bytes are also part of the associated data, so changing the key id
/// or version without the key is detected like any other alteration.
public struct SealedBlob: Sendable, Hashable {
    public static let currentVersion: UInt8 = 1
    public static let headerLength = 5
    public static let nonceLength = 24
    public static let tagLength = 16
    public static let minimumLength = headerLength + nonceLength + tagLength

    public var version: UInt8
    public var keyID: UInt32
    public var nonce: ArraySlice<UInt8>
    public var ciphertext: ArraySlice<UInt8>
    var header: ArraySlice<UInt8>

    /// Parses the layout without opening anything. Throws ``CryptoError/Code/malformedBlob``.
    public init(parsing bytes: [UInt8]) throws(CryptoError) {
        guard bytes.count >= Self.minimumLength else {
            throw CryptoError(.malformedBlob, "sealed value is \(bytes.count) bytes, shorter than the \(Self.minimumLength)-byte minimum")
        }
        guard bytes[0] == Self.currentVersion else {
            throw CryptoError(.malformedBlob, "sealed value has format version \(bytes[0]); this build reads version \(Self.currentVersion)")
        }
        version = bytes[0]
        keyID = bytes[1..<5].reduce(0) { $0 << 8 | UInt32($1) }
        header = bytes[0..<Self.headerLength]
        nonce = bytes[Self.headerLength..<(Self.headerLength + Self.nonceLength)]
        ciphertext = bytes[(Self.headerLength + Self.nonceLength)...]
    }

    static func header(keyID: UInt32) -> [UInt8] {
        [currentVersion] + withUnsafeBytes(of: keyID.bigEndian) { Array($0) }
    }
}
