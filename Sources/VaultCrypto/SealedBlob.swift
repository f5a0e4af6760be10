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
        keyID = try Self.checkedKeyID(bytes)
        version = bytes[0]
        header = bytes[0..<Self.headerLength]
        nonce = bytes[Self.headerLength..<(Self.headerLength + Self.nonceLength)]
        ciphertext = bytes[(Self.headerLength + Self.nonceLength)...]
    }

    /// The id of the key that sealed `bytes`, read in place after the same checks as
    /// ``init(parsing:)`` (length, format version). Throws ``CryptoError/Code/malformedBlob``.
    public static func keyID(of bytes: UnsafeRawBufferPointer) throws(CryptoError) -> UInt32 {
        try checkedKeyID(bytes)
    }

    private static func checkedKeyID<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes) throws(CryptoError) -> UInt32
    where Bytes.Index == Int {
        guard bytes.count >= minimumLength else {
            throw CryptoError(.malformedBlob, "sealed value is \(bytes.count) bytes, shorter than the \(minimumLength)-byte minimum")
        }
        let start = bytes.startIndex
        guard bytes[start] == currentVersion else {
            throw CryptoError(.malformedBlob, "sealed value has format version \(bytes[start]); this build reads version \(currentVersion)")
        }
        return UInt32(bytes[start + 1]) << 24 | UInt32(bytes[start + 2]) << 16 | UInt32(bytes[start + 3]) << 8 | UInt32(bytes[start + 4])
    }

    static func header(keyID: UInt32) -> [UInt8] {
        [currentVersion] + withUnsafeBytes(of: keyID.bigEndian) { Array($0) }
    }
}
