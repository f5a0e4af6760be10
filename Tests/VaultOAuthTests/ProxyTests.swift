import Foundation
import Logging
import Testing
import VaultTestSupport

@testable import VaultOAuth

/// Behind a corporate proxy: https goes through a CONNECT tunnel with TLS and pins end to end
/// with the provider; loopback and NO_PROXY hosts go direct; a refused tunnel says so. And a
/// private certificate authority from a PEM bundle.
@Suite("HTTPS_PROXY and CA files on the NIO transport", .timeLimit(.minutes(TestTimeScale.minutes(3))))
struct ProxyTests {
    /// One chain for the whole suite (and one unrelated), made once: key generation and signing
    /// under a sanitizer, in every test at once, kept the cooperative pool busy enough that the
    /// TLS checks queued behind it timed out.
    static let chain = Result { try TestChain() }
    static let otherChain = Result { try TestChain() }

    /// Generous, like PinningTests': under AddressSanitizer with the whole suite starting at
    /// once, the first TLS exchanges of this suite were seen to take over a minute.
    static let bound = TestTimeScale.scaled(.seconds(90))

    static func transport(_ chain: TestChain, proxy: String?) throws -> OAuthClient {
        let transport = NIOTransport(
            timeout: Self.bound, trustRoots: try .init(derCertificates: [chain.root.der]),
            proxy: try proxy.map { try ProxyConfiguration(url: $0) })
        return OAuthClient(transport: transport, logger: PinningTests.quiet, requestDeadline: Self.bound)
    }

    static func proxiedEndpoint(_ server: LoopbackServer) throws -> URL {
        try #require(URL(string: "https://\(TestChain.proxiedHost):\(server.port)/oauth/token"))
    }

    @Test("a pinned refresh goes through the proxy's CONNECT: the proxy sees the host and its credentials, the server the request")
    func tunnelled() async throws {
        let chain = try Self.chain.get()
        let proxy = try ConnectProxy.start()
        defer { proxy.stop() }
        try await withServer(chain, answer: .json(200, PinningTests.tokenAnswer)) { server in
            let client = try Self.transport(chain, proxy: "http://carol:s%40cret@127.0.0.1:\(proxy.port)")
            let tokens = try await client.refresh(
                refreshToken: "refresh-through-proxy", endpoint: try Self.proxiedEndpoint(server), client: PinningTests.credentials,
                pins: [try SPKIPin(chain.leaf.pin)])
            #expect(tokens.accessToken == "access-after-pinned-refresh")
            let tunnels = proxy.tunnels.value
            #expect(tunnels.map(\.authority) == ["\(TestChain.proxiedHost):\(server.port)"])
            #expect(tunnels.first?.proxyAuthorization == "Basic " + Data("carol:s@cret".utf8).base64EncodedString())
            let request = try #require(server.log.value.requests.first)
            #expect(request.headers["host"] == "\(TestChain.proxiedHost):\(server.port)")
            #expect(request.headers["proxy-authorization"] == nil, "the proxy's credentials stay with the proxy")
            #expect(request.body.contains("refresh-through-proxy"))
        }
    }

    @Test("through the proxy, a certificate naming the proxy's address but not the host is refused: identity is the target's")
    func identityIsTheTargets() async throws {
        let chain = try Self.chain.get()
        let proxy = try ConnectProxy.start()
        defer { proxy.stop() }
        try await withServer(chain, answer: .json(200, PinningTests.tokenAnswer)) { server in
            // The leaf names 127.0.0.1, the proxy's own address, and not this host: a direct
            // check against the peer's address would have let it through.
            let client = try Self.transport(chain, proxy: "http://127.0.0.1:\(proxy.port)")
            let endpoint = try #require(URL(string: "https://elsewhere.proxied.test:\(server.port)/oauth/token"))
            do throws(RefreshError) {
                _ = try await client.refresh(refreshToken: "refresh-never-sent", endpoint: endpoint, client: PinningTests.credentials)
                Issue.record("a certificate for another name was accepted through the proxy")
            } catch {
                #expect("\(error)".contains("certificate check of elsewhere.proxied.test"), "\(error)")
            }
            #expect(proxy.tunnels.value.count == 1)
            #expect(server.log.value.applicationBytes == 0)
        }
    }

    @Test("a wrong pin through the proxy: the tunnel opens, the handshake is refused, not a byte of the request is sent")
    func pinsAreEndToEnd() async throws {
        let chain = try Self.chain.get()
        let proxy = try ConnectProxy.start()
        defer { proxy.stop() }
        try await withServer(chain, answer: .json(200, PinningTests.tokenAnswer)) { server in
            let client = try Self.transport(chain, proxy: "127.0.0.1:\(proxy.port)")
            let endpoint = try Self.proxiedEndpoint(server)
            let pins = [try SPKIPin(TestChain.unrelatedPin)]
            do throws(RefreshError) {
                _ = try await client.refresh(refreshToken: "refresh-never-sent", endpoint: endpoint, client: PinningTests.credentials, pins: pins)
                Issue.record("the refresh went through a wrong pin")
            } catch {
                #expect(error.isPinningFailure, "\(error)")
            }
            #expect(proxy.tunnels.value.count == 1)
            #expect(server.log.value.applicationBytes == 0)
        }
    }

    @Test("a proxy that refuses the tunnel (407, 403): the error names the proxy, and nothing reaches the server", arguments: [407, 403])
    func refusedTunnel(status: Int) async throws {
        let chain = try Self.chain.get()
        let proxy = try ConnectProxy.start(status: status)
        defer { proxy.stop() }
        try await withServer(chain, answer: .json(200, PinningTests.tokenAnswer)) { server in
            let client = try Self.transport(chain, proxy: "http://127.0.0.1:\(proxy.port)")
            let endpoint = try Self.proxiedEndpoint(server)
            do throws(RefreshError) {
                _ = try await client.refresh(refreshToken: "refresh-never-sent", endpoint: endpoint, client: PinningTests.credentials)
                Issue.record("the refresh went through a refused tunnel")
            } catch {
                let message = "\(error)"
                #expect(message.contains("the proxy http://127.0.0.1:\(proxy.port)"), "\(message)")
                #expect(message.contains(status == 407 ? "asked for credentials" : "error status"), "\(message)")
                #expect(!message.contains("refresh-never-sent"))
            }
            #expect(server.log.value.connections == 0)
        }
    }

    @Test("a loopback destination never goes through the proxy")
    func loopbackGoesDirect() async throws {
        let chain = try Self.chain.get()
        let proxy = try ConnectProxy.start()
        defer { proxy.stop() }
        try await withServer(chain, answer: .json(200, PinningTests.tokenAnswer)) { server in
            let client = try Self.transport(chain, proxy: "http://127.0.0.1:\(proxy.port)")
            let tokens = try await client.refresh(
                refreshToken: "refresh-direct", endpoint: server.url("/oauth/token"), client: PinningTests.credentials)
            #expect(tokens.accessToken == "access-after-pinned-refresh")
            #expect(proxy.tunnels.value.isEmpty)
        }
    }

    @Test(
        "NO_PROXY: host and subdomains, a leading dot or *., addresses and networks, * for all; loopback is never proxied",
        arguments: [
            ("id.corp.example", true), ("corp.example", true), ("login.id.corp.example", true), ("notcorp.example", false),
            ("api.internal", true), ("10.1.2.3", true), ("11.1.2.3", false), ("fd00::5", true), ("2001:db8::1", false),
            ("localhost", true), ("127.0.0.53", true), ("127.1", true), ("::1", true), ("id.example.com", false),
            ("trailing.example", true),
        ])
    func exclusions(host: String, direct: Bool) throws {
        let proxy = try ProxyConfiguration(
            url: "proxy.corp.example:3128", exclusions: [" .corp.example", "*.internal", "10.0.0.0/8", "fd00::/8", "trailing.example."])
        #expect(proxy.proxies(host) == !direct)
        #expect(try ProxyConfiguration(url: "proxy:3128", exclusions: ["*"]).proxies("id.example.com") == false)
        #expect(try ProxyConfiguration(url: "proxy:3128", exclusions: ["api.internal:8443"]).proxies("api.internal") == false)
    }

    @Test("HTTPS_PROXY from the environment: https_proxy first, port 1080 by default; an https or socks proxy is refused without its password")
    func environment() throws {
        let both = try #require(
            try ProxyConfiguration.fromEnvironment(["https_proxy": "http://lower:8080", "HTTPS_PROXY": "http://upper:8080", "NO_PROXY": "a.example,b"]))
        #expect(both.host == "lower" && both.port == 8080)
        #expect(both.exclusions == ["a.example", "b"])
        #expect(try ProxyConfiguration.fromEnvironment(["HTTPS_PROXY": "proxy.corp"])?.port == 1080)
        #expect(try ProxyConfiguration.fromEnvironment(["HTTP_PROXY": "http://plain:80"]) == nil, "plain http is never proxied")
        #expect(try ProxyConfiguration.fromEnvironment(["HTTPS_PROXY": ""]) == nil)
        #expect(try ProxyConfiguration.fromEnvironment(["HTTPS_PROXY": "p:1", "no_proxy": "", "NO_PROXY": "a.example"])?.exclusions == ["a.example"])
        for url in ["https://dave:hunter2@proxy:443", "socks5://dave:hunter2@proxy:1080"] {
            #expect {
                try ProxyConfiguration.fromEnvironment(["HTTPS_PROXY": url])
            } throws: { error in
                let message = "\(error)"
                return message.contains("only an http:// proxy") && !message.contains("hunter2")
            }
        }
        let withCredentials = try ProxyConfiguration(url: "http://dave:hunter2@proxy:3128")
        #expect(!"\(withCredentials)".contains("hunter2"))
        #expect(!String(reflecting: withCredentials).contains("hunter2"))
    }

    @Test("a CA file: the server's chain is trusted with the bundle, refused with another; a missing or empty file is named")
    func caFile() async throws {
        let chain = try Self.chain.get()
        let directory = try TemporaryDirectory()
        let bundle = directory.url.appending(path: "corp-ca.pem")
        try Data(Self.pem(chain.root.der).utf8).write(to: bundle)
        let other = directory.url.appending(path: "other-ca.pem")
        try Data(Self.pem(try Self.otherChain.get().root.der).utf8).write(to: other)
        try await withServer(chain, answer: .json(200, PinningTests.tokenAnswer)) { server in
            func refresh(trusting path: String) async throws -> TokenResponse {
                let transport = NIOTransport(timeout: Self.bound, trustRoots: try .init(pemFile: path))
                return try await OAuthClient(transport: transport, logger: PinningTests.quiet, requestDeadline: Self.bound).refresh(
                    refreshToken: "refresh-ca", endpoint: server.url("/oauth/token"), client: PinningTests.credentials)
            }
            let trusted = try await refresh(trusting: bundle.path)
            #expect(trusted.accessToken == "access-after-pinned-refresh")
            // Named lazily (what `vault` does with SSL_CERT_FILE): read at the first request.
            let lazy = NIOTransport(timeout: Self.bound, trustRoots: .pemFile(lazily: bundle.path))
            let lazily = try await OAuthClient(transport: lazy, logger: PinningTests.quiet, requestDeadline: Self.bound).refresh(
                refreshToken: "refresh-ca", endpoint: server.url("/oauth/token"), client: PinningTests.credentials)
            #expect(lazily.accessToken == "access-after-pinned-refresh")
            let unreadable = NIOTransport(timeout: Self.bound, trustRoots: .pemFile(lazily: directory.url.appending(path: "gone.pem").path))
            do {
                _ = try await OAuthClient(transport: unreadable, logger: PinningTests.quiet, requestDeadline: Self.bound).refresh(
                    refreshToken: "refresh-never-sent", endpoint: server.url("/oauth/token"), client: PinningTests.credentials)
                Issue.record("a request went out without its CA file")
            } catch {
                #expect("\(error)".contains("cannot read the CA file"), "\(error)")
            }
            #expect(server.log.value.requests.count == 2, "the request without its CA file was not sent")
            do {
                _ = try await refresh(trusting: other.path)
                Issue.record("a chain to another CA was trusted")
            } catch {
                #expect(error is RefreshError, "\(error)")
            }
        }
        #expect {
            try NIOTransport.TrustRoots(pemFile: directory.url.appending(path: "missing.pem").path)
        } throws: { "\($0)".contains("cannot read the CA file") && "\($0)".contains("missing.pem") }
        let empty = directory.url.appending(path: "empty.pem")
        try Data().write(to: empty)
        #expect(throws: TrustRootsError.self) { try NIOTransport.TrustRoots(pemFile: empty.path) }
    }

    static func pem(_ der: [UInt8]) -> String {
        let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN CERTIFICATE-----\n\(base64)\n-----END CERTIFICATE-----\n"
    }
}
