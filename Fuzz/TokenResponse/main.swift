// libFuzzer target: the OAuth token-response parser (OAuthWire/TokenResponse.swift) on
// arbitrary bodies. Built by Fuzz/run.sh with the OAuthWire module under the fuzzer.
import Foundation
import OAuthWire

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let data = start.map { Data(bytes: $0, count: count) } ?? Data()
    do {
        let response = try TokenResponse.parse(data)
        // What parse accepts is usable as is: a non-empty token and type, a bounded lifetime,
        // and a description that never shows a token.
        precondition(!response.accessToken.isEmpty && !response.tokenType.isEmpty)
        precondition((response.expiresIn ?? 0) >= 0 && (response.expiresIn ?? 0) <= TokenResponse.maximumExpiresIn)
        _ = response.lifetime
        let rendered = printed(response)
        // The same response with every server-chosen text replaced: what is printed whatever the
        // server sent. A token that is part of that text (a "token" reading `expiresIn: 3600),`)
        // shows nothing of the server's token.
        let fixed = printed(
            TokenResponse(
                accessToken: "A", tokenType: "T", expiresIn: response.expiresIn, refreshToken: response.refreshToken.map { _ in "R" },
                scope: response.scope.map { _ in "S" }, idToken: response.idToken.map { _ in "I" }))
        for token in [response.accessToken, response.refreshToken, response.idToken].compactMap({ $0 }) {
            let core = token.trimmingCharacters(in: .whitespaces)
            if core.count >= 8 && !fixed.contains(core) { precondition(!rendered.contains(core)) }
        }
    } catch {
        _ = String(describing: error)
    }
    return 0
}

/// The description and the `dump` of `response`, as a log line or a debugger would show them.
func printed(_ response: TokenResponse) -> String {
    var rendered = String(describing: response)
    dump(response, to: &rendered)
    return rendered
}
