/// One message of agent protocol 2: fields in order, each a short key and a value of bytes.
///
/// On the wire a message is one frame: its length (4 bytes, big-endian, the length excluded)
/// and then each field as the key's length (1 byte), the key (UTF-8), the value's length (4
/// bytes, big-endian) and the value. A key may repeat (a list); a reader ignores keys it does
/// not know, so later versions add fields without breaking older readers. No JSON, no
/// Foundation: the lean client reads it with the standard library alone.
///
/// ```swift
/// var request = WireMessage()
/// request.append("op", "token")
/// request.append("min_ttl", "600")
/// let frame = request.frame()          // what goes on the socket
/// let back = try WireMessage(body: frame.dropFirst(4))
/// back["op"]                           // "token"
/// ```
public struct WireMessage: Sendable, Equatable {
    public struct Field: Sendable, Equatable {
        public var key: String
        public var value: [UInt8]
    }

    public private(set) var fields: [Field] = []

    public init() {}

    /// Decodes a frame's body (the bytes after its length).
    public init(body: some Collection<UInt8>) throws(WireError) {
        let bytes = Array(body)
        var index = 0
        while index < bytes.count {
            let keyLength = Int(bytes[index])
            index += 1
            guard keyLength > 0, bytes.count - index >= keyLength + 4 else { throw .malformed("a field is cut off") }
            guard let key = String(validating: bytes[index..<index + keyLength], as: UTF8.self) else { throw .malformed("a key is not UTF-8") }
            index += keyLength
            let valueLength = Int(Self.readLength(bytes, at: index))
            index += 4
            guard bytes.count - index >= valueLength else { throw .malformed("the value of \(key) is cut off") }
            fields.append(Field(key: key, value: Array(bytes[index..<index + valueLength])))
            index += valueLength
        }
    }

    /// Adds a field (keys are at most 255 bytes: the protocol's own, short names).
    public mutating func append(_ key: String, _ value: [UInt8]) {
        precondition(!key.isEmpty && key.utf8.count <= 255, "a wire key is 1 to 255 bytes")
        fields.append(Field(key: key, value: value))
    }

    public mutating func append(_ key: String, _ value: String) {
        append(key, Array(value.utf8))
    }

    /// Adds the field when `value` is not nil.
    public mutating func append(_ key: String, ifPresent value: String?) {
        if let value { append(key, value) }
    }

    /// The first value of `key` as text, or nil.
    public subscript(key: String) -> String? {
        fields.first { $0.key == key }.map { String(decoding: $0.value, as: UTF8.self) }
    }

    /// Every value of `key`, in order.
    public func values(_ key: String) -> [String] {
        fields.filter { $0.key == key }.map { String(decoding: $0.value, as: UTF8.self) }
    }

    /// The whole frame: length, then the fields.
    public func frame() -> [UInt8] {
        var body: [UInt8] = [0, 0, 0, 0]
        body.reserveCapacity(fields.reduce(4) { $0 + 5 + $1.key.utf8.count + $1.value.count })
        for field in fields {
            body.append(UInt8(field.key.utf8.count))
            body.append(contentsOf: field.key.utf8)
            Self.appendLength(UInt32(field.value.count), to: &body)
            body.append(contentsOf: field.value)
        }
        let length = UInt32(body.count - 4)
        body[0] = UInt8(length >> 24)
        body[1] = UInt8((length >> 16) & 0xff)
        body[2] = UInt8((length >> 8) & 0xff)
        body[3] = UInt8(length & 0xff)
        return body
    }

    static func appendLength(_ length: UInt32, to bytes: inout [UInt8]) {
        bytes.append(UInt8(length >> 24))
        bytes.append(UInt8((length >> 16) & 0xff))
        bytes.append(UInt8((length >> 8) & 0xff))
        bytes.append(UInt8(length & 0xff))
    }

    /// The big-endian length at `index` (4 bytes must be there).
    public static func readLength(_ bytes: some RandomAccessCollection<UInt8>, at index: Int) -> UInt32 {
        let start = bytes.index(bytes.startIndex, offsetBy: index)
        var value: UInt32 = 0
        for byte in bytes[start..<bytes.index(start, offsetBy: 4)] { value = value << 8 | UInt32(byte) }
        return value
    }
}

extension WireMessage: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The keys and the length of each value, never a value: a message may carry a token or a
    /// passphrase, and may be printed or dumped by a caller's log line.
    public var description: String {
        "WireMessage(" + fields.map { "\($0.key): <\($0.value.count) bytes>" }.joined(separator: ", ") + ")"
    }

    public var debugDescription: String { description }
    /// The description alone, so `dump` cannot print a value.
    public var customMirror: Mirror { Mirror(self, children: ["description": description], displayStyle: .struct) }
}

/// A frame that is not a message of the protocol.
public enum WireError: Error, Sendable, Hashable, CustomStringConvertible {
    case malformed(String)

    public var description: String {
        switch self {
        case .malformed(let reason): "not a message of the agent protocol: \(reason)"
        }
    }
}
