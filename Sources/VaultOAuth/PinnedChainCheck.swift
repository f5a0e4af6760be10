import Foundation
import NIOCore
import NIOSSL
import SwiftASN1
import VaultCrypto
import VaultSync
import X509

/// The certificate check of a pinned handshake, run by NIOSSL in place of its own
/// (``NIOTransport``). The handshake, and with it the request, goes ahead only when the
/// server's chain validates and the validated chain holds one of the pins. Every other
/// outcome is a pinning failure whose reason says which part failed: pins add to the trust
/// check, they never replace it.
///
/// NIOSSL's custom verification callback replaces BoringSSL's verification entirely, so the
/// chain is validated here by swift-certificates' `Verifier`: RFC 5280 path building to the
/// transport's ``NIOTransport/TrustRoots`` (signatures, validity, basic constraints, key usage)
/// and the server's identity (host name or IP); NIOSSL checks the host name once more after
/// the handshake. Pins are matched against the SHA-256 of each certificate's
/// SubjectPublicKeyInfo in the *validated* chain (RFC 7469 §2.6), so a pinned intermediate
/// that merely rides along in the presented certificates proves nothing. SHA-256 is libsodium's
/// (``Digest/sha256(_:)``); no cryptography is written here.
///
/// Without pins it is the identity check of a connection through a proxy: the chain must
/// validate and name the target, which NIOSSL cannot check there (it would compare IP names
/// with the proxy's address).
///
/// ```swift
/// let check = PinnedChainCheck(pins: pins, target: target, trustRoots: .system)
/// let tls = try NIOSSLClientHandler(context: context, serverHostname: "id.example.com", customVerificationCallback: check.verify)
/// ```
struct PinnedChainCheck: Sendable {
    /// What the check decided; read after a failed handshake to report it as a pinning failure.
    enum Verdict: Sendable, Hashable {
        /// The validated chain holds a pin (or, without pins, validates for the target).
        case pinned
        /// Refused, and why (this build's words: which check failed, never certificate contents).
        case refused(String)
    }

    let pins: Set<[UInt8]>
    let serverHostname: String?
    let serverIP: String?
    let trustRoots: NIOTransport.TrustRoots
    private let decided = Locked<Verdict?>(nil)

    init(pins: [SPKIPin], target: HTTPTarget, trustRoots: NIOTransport.TrustRoots) {
        self.pins = Set(pins.map(\.digest))
        serverHostname = target.isIPLiteral ? nil : target.host
        serverIP = target.isIPLiteral ? target.host : nil
        self.trustRoots = trustRoots
    }

    /// The verdict, once the callback ran.
    var verdict: Verdict? { decided.withLock { $0 } }

    /// NIOSSL's `NIOSSLCustomVerificationCallback`: called on the event loop with the
    /// certificates as presented (leaf first); answers through `promise` from a task.
    func verify(_ presented: [NIOSSLCertificate], _ promise: EventLoopPromise<NIOSSLVerificationResult>) {
        let der: [[UInt8]]
        do {
            der = try presented.map { try $0.toDERBytes() }
        } catch {
            promise.succeed(record(.refused("its certificates could not be read")))
            return
        }
        Task { promise.succeed(await self.judge(der)) }
    }

    /// Validates the chain, then looks for a pin in it. Every outcome is recorded first.
    func judge(_ der: [[UInt8]]) async -> NIOSSLVerificationResult {
        let certificates: [Certificate]
        do {
            certificates = try der.map { try Certificate(derEncoded: $0) }
        } catch {
            return record(.refused("its certificates could not be parsed"))
        }
        guard let leaf = certificates.first else { return record(.refused("it presented no certificate")) }
        let (hostname, ip) = (serverHostname, serverIP)
        var verifier = Verifier(rootCertificates: trustRoots.certificateStore) {
            RFC5280Policy()
            ServerIdentityPolicy(serverHostname: hostname, serverIP: ip)
        }
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore(certificates.dropFirst())) {
        case .validCertificate(let chain):
            if pins.isEmpty || chain.contains(where: holdsPin) { return record(.pinned) }
            return record(.refused("its validated certificate chain holds none of the \(pins.count) pin(s)"))
        case .couldNotValidate(let failures):
            let why = failures.isEmpty ? "no path to a trusted root" : "no path to a trusted root that meets RFC 5280 and names this host"
            if pins.isEmpty { return record(.refused("its certificate chain does not validate (\(why))")) }
            if certificates.contains(where: holdsPin) {
                return record(.refused("a pinned key was presented, but the chain does not validate (\(why)); a pin counts only in a valid chain"))
            }
            return record(.refused("its certificate chain holds none of the \(pins.count) pin(s) and does not validate either (\(why))"))
        }
    }

    /// Whether the certificate's key is one of the pins.
    func holdsPin(_ certificate: Certificate) -> Bool {
        pins.contains(Digest.sha256(certificate.publicKey.subjectPublicKeyInfoBytes))
    }

    private func record(_ verdict: Verdict) -> NIOSSLVerificationResult {
        decided.withLock { $0 = verdict }
        return verdict == .pinned ? .certificateVerified : .failed
    }
}

extension NIOTransport.TrustRoots {
    /// The same roots for swift-certificates' `Verifier`.
    var certificateStore: CertificateStore {
        switch source {
        case .system: .systemTrustRoots
        case .certificates(_, let store): store
        // Resolved before a check is made (NIOTransport.exchange); unresolved, it trusts nothing.
        case .file: CertificateStore()
        }
    }
}

extension SPKIPin {
    /// The pin of a DER-encoded certificate's key (its SubjectPublicKeyInfo, hashed with SHA-256).
    ///
    /// ```swift
    /// let pin = try SPKIPin(certificateDER: Array(try Data(contentsOf: certificateURL)))
    /// print(pin)   // sha256/…
    /// ```
    public init(certificateDER: [UInt8]) throws {
        let certificate = try Certificate(derEncoded: certificateDER)
        try self.init(digest: Digest.sha256(certificate.publicKey.subjectPublicKeyInfoBytes))
    }
}
