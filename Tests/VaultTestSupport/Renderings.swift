/// Every way Swift turns a value into text: `String(describing:)`, `String(reflecting:)`,
/// string interpolation, and `dump()`, which walks the value's `Mirror` (its children, theirs…).
///
/// ```swift
/// for text in Renderings.of(tokens) { #expect(!text.contains(refreshToken)) }
/// ```
public enum Renderings {
    /// The four renderings of `value`.
    public static func of<T>(_ value: T) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        return [String(describing: value), String(reflecting: value), "\(value)", dumped]
    }
}
