/// An ordered list of HTTP header fields whose lookup ignores the case of the name.
///
/// ```swift
/// var headers = HTTPHeaderFields()
/// headers["Content-Type"] = "application/json"
/// headers["content-type"] // "application/json"
/// ```
public struct HTTPHeaderFields: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// One header field as it was set or received.
    public struct Field: Sendable, Hashable {
        /// The field name as spelled by whoever set it.
        public var name: String
        /// The field value.
        public var value: String

        /// Creates a field.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    private var fields: [Field]

    /// Creates an empty set of fields.
    public init() {
        fields = []
    }

    /// Creates fields from name/value pairs, keeping their order.
    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { Field(name: $0.0, value: $0.1) }
    }

    /// Creates fields from a dictionary literal, keeping the literal's order.
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value for `name`, compared case-insensitively; setting replaces every field of that name.
    public subscript(name: String) -> String? {
        get { fields.first { Self.matches($0.name, name) }?.value }
        set {
            fields.removeAll { Self.matches($0.name, name) }
            if let newValue { fields.append(Field(name: name, value: newValue)) }
        }
    }

    /// Every value for `name`, compared case-insensitively, in order.
    public func values(for name: String) -> [String] {
        fields.filter { Self.matches($0.name, name) }.map(\.value)
    }

    /// Appends a field without removing existing ones of the same name.
    public mutating func append(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// The field names, in order (values are deliberately not part of any description).
    public var names: [String] { fields.map(\.name) }

    /// Iterates the fields in order.
    public func makeIterator() -> IndexingIterator<[Field]> {
        fields.makeIterator()
    }

    private static func matches(_ lhs: String, _ rhs: String) -> Bool {
        lhs.utf8.count == rhs.utf8.count && lhs.lowercased() == rhs.lowercased()
    }
}
