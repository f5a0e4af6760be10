import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A certificate chain made inside a test, never written to disk: a root CA, an intermediate
/// CA and a leaf for `127.0.0.1` / `localhost` / ``proxiedHost`` (P-256 keys, swift-certificates), plus the
/// SPKI pin of each, computed here with swift-crypto's SHA-256, independently of the code under test.
///
/// ```swift
/// let chain = try TestChain()
/// let server = try await LoopbackServer.start(tls: chain.serverIdentity, answer: .json(200, body))
/// let transport = NIOTransport(trustRoots: try .init(derCertificates: [chain.root.der]))
/// let pins = [chain.leaf.pin]
/// ```
public struct TestChain: Sendable {
    /// One certificate of the chain and its key.
    public struct Member: Sendable {
        public let der: [UInt8]
        /// `sha256/BASE64` of its SubjectPublicKeyInfo.
        public let pin: String
        let keyPEM: String
    }

    public let root: Member
    public let intermediate: Member
    public let leaf: Member

    /// A new root, intermediate and leaf, each with a fresh key.
    public init() throws {
        let root = try Self.makeAuthority(named: "CredentialVault test root", signedBy: nil)
        let intermediate = try Self.makeAuthority(named: "CredentialVault test intermediate", signedBy: root)
        self.init(
            root: root.member, intermediate: intermediate.member,
            leaf: try Self.makeLeaf(signedBy: intermediate))
    }

    private init(root: Member, intermediate: Member, leaf: Member) {
        self.root = root
        self.intermediate = intermediate
        self.leaf = leaf
    }

    /// The same root and intermediate with a new leaf key: the server's key rollover.
    public func withNewLeafKey() throws -> TestChain {
        let issuer = try Authority(member: intermediate)
        return TestChain(root: root, intermediate: intermediate, leaf: try Self.makeLeaf(signedBy: issuer))
    }

    /// A chain that presents `impostor`'s leaf followed by this chain's intermediate, which did not
    /// sign it: a pinned certificate riding along with a key it does not vouch for.
    public func impostorLeaf(with impostor: TestChain) -> TestChain {
        TestChain(root: root, intermediate: intermediate, leaf: impostor.leaf)
    }

    /// What the server presents: the leaf, then the intermediate; and the leaf's key.
    public var serverIdentity: LoopbackServer.TLSIdentity {
        LoopbackServer.TLSIdentity(chainDER: [leaf.der, intermediate.der], keyPEM: leaf.keyPEM)
    }

    // MARK: - Making certificates

    private struct Authority {
        let member: Member
        let name: DistinguishedName
        let key: P256.Signing.PrivateKey

        init(member: Member) throws {
            self.member = member
            name = try Certificate(derEncoded: member.der).subject
            key = try P256.Signing.PrivateKey(pemRepresentation: member.keyPEM)
        }

        init(member: Member, name: DistinguishedName, key: P256.Signing.PrivateKey) {
            self.member = member
            self.name = name
            self.key = key
        }
    }

    private static func makeAuthority(named commonName: String, signedBy issuer: Authority?) throws -> Authority {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName(commonName) }
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
            Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            SubjectKeyIdentifier(hash: Certificate.PublicKey(key.publicKey))
            if let issuer { AuthorityKeyIdentifier(keyIdentifier: try keyIdentifier(of: issuer)) }
        }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(86_400),
            issuer: issuer?.name ?? name, subject: name, signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(issuer?.key ?? key))
        return Authority(member: try member(certificate, key: key), name: name, key: key)
    }

    private static func makeLeaf(signedBy issuer: Authority) throws -> Member {
        let key = P256.Signing.PrivateKey()
        let name = try DistinguishedName { CommonName("127.0.0.1") }
        let extensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
            try ExtendedKeyUsage([.serverAuth])
            // idp.proxied.test: a name only a test proxy resolves (to this loopback server).
            SubjectAlternativeNames([
                .dnsName("localhost"), .dnsName(TestChain.proxiedHost), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
            ])
            AuthorityKeyIdentifier(keyIdentifier: try keyIdentifier(of: issuer))
        }
        let certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(86_400),
            issuer: issuer.name, subject: name, signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions,
            issuerPrivateKey: Certificate.PrivateKey(issuer.key))
        return try member(certificate, key: key)
    }

    private static func keyIdentifier(of authority: Authority) throws -> ArraySlice<UInt8> {
        SubjectKeyIdentifier(hash: Certificate.PublicKey(authority.key.publicKey)).keyIdentifier
    }

    private static func member(_ certificate: Certificate, key: P256.Signing.PrivateKey) throws -> Member {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        let digest = SHA256.hash(data: Array(certificate.publicKey.subjectPublicKeyInfoBytes))
        return Member(
            der: serializer.serializedBytes, pin: "sha256/" + Data(digest).base64EncodedString(),
            keyPEM: key.pemRepresentation)
    }
}

extension TestChain {
    /// A host name in the leaf's certificate that does not resolve: reached only through
    /// ``ConnectProxy``, which tunnels it to the loopback server.
    public static let proxiedHost = "idp.proxied.test"

    /// A well-formed pin of a key no test server has.
    public static let unrelatedPin = "sha256/" + Data(repeating: 0xA5, count: 32).base64EncodedString()
}
