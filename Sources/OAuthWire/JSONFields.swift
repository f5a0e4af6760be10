import Foundation

/// The top-level members of a JSON object, each reduced to its kind and scalar value.
///
/// Built on `JSONDecoder` (depth-limited, never traps on malformed input); members whose
/// names are not asked for are never inspected.
package struct JSONFields: Decodable {
    package enum Value: Equatable {
        case string(String)
        case integer(Int)
        case number(Double)
        case bool(Bool)
        case null
        /// An array of strings (an `aud` claim, say): kept, unlike other arrays.
        case strings([String])
        case composite

        package var typeName: String {
            switch self {
            case .string: "a string"
            case .integer, .number: "a number"
            case .bool: "a boolean"
            case .null: "null"
            case .strings: "an array of strings"
            case .composite: "an array or object"
            }
        }
    }

    private let values: [String: Value]

    package subscript(name: String) -> Value? { values[name] }

    /// Parses `data` as a JSON object, or returns nil if it is not one.
    package static func parse(_ data: Data) -> JSONFields? {
        try? JSONDecoder().decode(JSONFields.self, from: data)
    }

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: MemberName.self)
        var values: [String: Value] = [:]
        for key in container.allKeys {
            values[key.stringValue] = Self.decodeValue(container, key)
        }
        self.values = values
    }

    private static func decodeValue(_ container: KeyedDecodingContainer<MemberName>, _ key: MemberName) -> Value {
        if (try? container.decodeNil(forKey: key)) == true { return .null }
        if let string = try? container.decode(String.self, forKey: key) { return .string(string) }
        if let bool = try? container.decode(Bool.self, forKey: key) { return .bool(bool) }
        if let integer = try? container.decode(Int.self, forKey: key) { return .integer(integer) }
        if let number = try? container.decode(Double.self, forKey: key) { return .number(number) }
        if let strings = try? container.decode([String].self, forKey: key) { return .strings(strings) }
        return .composite
    }

    private struct MemberName: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
