"""DPoP proof verification (RFC 9449 §4.3) with joserfc, for the interop provider (app.py).

    verifier = ProofVerifier()
    result = verifier.verify(header_values, method="POST", url="http://127.0.0.1:PORT/oauth/token",
                             require_nonce=False, access_token=None, bound_jkt=None)
    result.valid, result.jkt, result.only_nonce_failed, result.record()

Every step of RFC 9449 §4.3 is checked and recorded, in the RFC's order, each as
{"step", "check", "ok", "detail"} (ok None: the step could not be taken because an earlier one
failed, or does not apply). The steps, and what decides them:

    1  one_header       exactly one DPoP header field (Werkzeug joins repeated fields with ",",
                        which a JWS compact serialization cannot hold)
    2  jwt              one well-formed JWS compact serialization: joserfc `jws.extract_compact`
                        (three segments, a JSON header with `alg`); the payload a JSON object
    3  required_claims  header: typ, alg, jwk; claims: jti (a non-empty string), htm, htu (strings),
                        iat (a number); ath when an access token is presented; nonce when required
    4  typ              "dpop+jwt" exactly
    5  alg              an asymmetric JWS algorithm (IANA registry), not "none", and supported here
                        (ES256 only: SUPPORTED_ALGS)
    6  signature        joserfc `JWKRegistry.import_key(header["jwk"])`, then
                        `jws.validate_compact(obj, key, algorithms=SUPPORTED_ALGS)` (which also checks
                        the key type fits the algorithm)
    7  jwk_public       the jwk has no private member (d, p, q, dp, dq, qi, oth; an "oct" key is
                        symmetric and so never a public key), and joserfc reads it as a public key
    8  htm              = the request's method
    9  htu              = the request's URL without query and fragment, after RFC 3986 syntax- and
                        scheme-based normalisation (case of scheme and host, default port, empty
                        path); `htu_exact` in the record says whether it was the same string
   10  nonce            when nonces are required: a nonce this server issued and that is still
                        valid (NonceBook); otherwise not applicable
   11  iat              within IAT_PAST seconds before and IAT_FUTURE seconds after the server's clock
   12  ath, binding     with an access token: ath = base64url(SHA-256(token)), and the proof key's
                        RFC 7638 thumbprint = the jkt the token is bound to
  §11.1 jti_unique      the jti was never seen before in a proof whose signature verified (this run)

The jwk's RFC 7638 thumbprint (`jkt`) is joserfc's `Key.thumbprint()` (required members only,
sorted, SHA-256), cross-checked against one computed here with hashlib.
"""

import base64
import hashlib
import json
import secrets
import threading
import time
from urllib.parse import urlsplit, urlunsplit

from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import JWKRegistry

PROOF_TYPE = "dpop+jwt"
SUPPORTED_ALGS = ["ES256"]
# Registered asymmetric JWS algorithms (RFC 7518 §3.1, RFC 8037, RFC 8812, RFC 9864).
ASYMMETRIC_ALGS = {"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512",
                   "EdDSA", "Ed25519", "Ed448", "ES256K"}
PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "oth", "k")
IAT_PAST = 60
IAT_FUTURE = 5
NONCE_LIFETIME = 300
NONCE_ROTATION = 60


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def access_token_hash(token):
    """ath (RFC 9449 §4.2): base64url of the SHA-256 of the token's ASCII."""
    return b64url(hashlib.sha256(token.encode("ascii")).digest())


def thumbprint_by_hand(jwk):
    """RFC 7638 §3: the required members, lexicographic order, no whitespace, SHA-256."""
    required = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x"),
                "oct": ("k", "kty")}.get(jwk.get("kty"))
    if not required or not all(isinstance(jwk.get(m), str) for m in required):
        return None
    canonical = json.dumps({m: jwk[m] for m in required}, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return b64url(hashlib.sha256(canonical.encode()).digest())


_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalized_url(url):
    """RFC 3986 §6.2.2/§6.2.3 normalisation as RFC 9449 §4.3 allows, without query and fragment;
    None for a URL that is not absolute."""
    try:
        parts = urlsplit(url)
        scheme, host, port = parts.scheme.lower(), (parts.hostname or "").lower(), parts.port
    except ValueError:
        return None
    if not scheme or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS.get(scheme)) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", "", ""))


class NonceBook:
    """The nonces this server hands out (RFC 9449 §8): a current one, replaced every
    NONCE_ROTATION seconds; each is accepted for NONCE_LIFETIME seconds after it was issued."""

    def __init__(self):
        self.lock = threading.Lock()
        self.issued = {}  # nonce -> issued at
        self.current = None

    def current_nonce(self):
        with self.lock:
            now = time.time()
            if self.current is None or now - self.issued[self.current] >= NONCE_ROTATION:
                self.current = secrets.token_urlsafe(24)
                self.issued[self.current] = now
            for nonce in [n for n, t in self.issued.items() if now - t > NONCE_LIFETIME]:
                del self.issued[nonce]
            return self.current

    def valid(self, nonce):
        with self.lock:
            issued = self.issued.get(nonce) if isinstance(nonce, str) else None
            return issued is not None and time.time() - issued <= NONCE_LIFETIME


class Result:
    """One proof's verification: the ordered checks, the decoded header (public members of its
    jwk only) and claims, the jwk thumbprint."""

    def __init__(self):
        self.checks = []
        self.header = None
        self.claims = None
        self.jkt = None
        self.htu_exact = None
        self.htu_expected = None

    def add(self, step, check, ok, detail=""):
        self.checks.append({"step": step, "check": check, "ok": ok, "detail": detail})

    @property
    def failed(self):
        return [c["check"] for c in self.checks if c["ok"] is False]

    @property
    def valid(self):
        return not self.failed

    @property
    def only_nonce_failed(self):
        return self.failed == ["nonce"]

    def describe_failures(self):
        return "; ".join(f"{c['check']}: {c['detail']}" for c in self.checks if c["ok"] is False)

    def record(self):
        return {"header": self.header, "claims": self.claims, "jkt": self.jkt, "htu_expected": self.htu_expected,
                "htu_exact": self.htu_exact, "checks": self.checks, "valid": self.valid, "failed": self.failed}


def _public_view(header):
    """The header as recorded: a jwk's private members replaced by their names only."""
    shown = dict(header)
    jwk = header.get("jwk")
    if isinstance(jwk, dict):
        shown["jwk"] = {k: ("<private member>" if k in PRIVATE_MEMBERS else v) for k, v in jwk.items()}
    return shown


class ProofVerifier:
    def __init__(self, nonces=None):
        self.nonces = nonces or NonceBook()
        self.lock = threading.Lock()
        self.jtis = {}  # jti -> when first seen (proofs whose signature verified)

    def verify(self, values, method, url, require_nonce=False, access_token=None, bound_jkt=None):
        """values: the DPoP header field values the request carried (Werkzeug's getlist)."""
        result = Result()
        now = time.time()

        # 1. exactly one DPoP header field.
        one = len(values) == 1 and "," not in values[0]
        result.add(1, "one_header", one, "one field" if one else
                   f"{len(values)} fields" + (" (joined with ',')" if values and "," in values[0] else ""))
        proof = values[0].strip() if one else None

        # 2. a single well-formed JWS compact serialization whose payload is a JSON object.
        obj = header = claims = None
        if proof is not None:
            try:
                obj = jws.extract_compact(proof.encode("ascii"))
                header = obj.protected
                claims = json.loads(obj.payload)
                if not isinstance(header, dict) or not isinstance(claims, dict):
                    raise ValueError("header or payload is not a JSON object")
                result.add(2, "jwt", True, "JWS compact, JSON header and claims")
            except (JoseError, ValueError, UnicodeError) as error:
                obj = header = claims = None
                result.add(2, "jwt", False, f"not a well-formed JWS: {error!r}")
        else:
            result.add(2, "jwt", None, "no single proof")
        if header is None:
            for step, name in ((3, "required_claims"), (4, "typ"), (5, "alg"), (6, "signature"), (7, "jwk_public"),
                               (8, "htm"), (9, "htu"), (10, "nonce"), (11, "iat"), (11.1, "jti_unique")):
                result.add(step, name, None, "no proof to check")
            return result
        result.header = _public_view(header)
        result.claims = claims

        # 3. the required header parameters and claims.
        missing = [f"header.{k}" for k in ("typ", "alg", "jwk") if k not in header]
        missing += [f"claims.{k}" for k in ("jti", "htm", "htu", "iat") if k not in claims]
        if access_token is not None and "ath" not in claims:
            missing.append("claims.ath")
        if require_nonce and "nonce" not in claims:
            missing.append("claims.nonce")
        wrong = []
        if "jti" in claims and not (isinstance(claims["jti"], str) and claims["jti"]):
            wrong.append("jti is not a non-empty string")
        for k in ("htm", "htu"):
            if k in claims and not isinstance(claims[k], str):
                wrong.append(f"{k} is not a string")
        if "iat" in claims and (isinstance(claims["iat"], bool) or not isinstance(claims["iat"], (int, float))):
            wrong.append("iat is not a number")
        if "jwk" in header and not isinstance(header["jwk"], dict):
            wrong.append("jwk is not a JSON object")
        # Only the nonce missing is its own failure (step 10: use_dpop_nonce, not invalid_dpop_proof).
        structural = [m for m in missing if m != "claims.nonce"]
        result.add(3, "required_claims", not structural and not wrong,
                   "; ".join([*(["missing " + ", ".join(structural)] if structural else []), *wrong]) or
                   "typ, alg, jwk; jti, htm, htu, iat" + (", ath" if access_token is not None else "")
                   + (" (nonce: step 10)" if require_nonce else ""))

        # 4. typ
        result.add(4, "typ", header.get("typ") == PROOF_TYPE, f"typ {header.get('typ')!r}")

        # 5. alg: asymmetric, registered, not none, supported here.
        alg = header.get("alg")
        alg_ok = alg in ASYMMETRIC_ALGS and alg in SUPPORTED_ALGS
        result.add(5, "alg", alg_ok, f"alg {alg!r}" + ("" if alg_ok else
                   (" is not an asymmetric signature algorithm" if alg not in ASYMMETRIC_ALGS else
                    f" is not supported here ({', '.join(SUPPORTED_ALGS)})")))

        # 6. the signature, with the key in the header.
        key = None
        jwk = header.get("jwk")
        if isinstance(jwk, dict):
            try:
                key = JWKRegistry.import_key(jwk)
            except (JoseError, ValueError, TypeError, KeyError) as error:
                result.add(6, "signature", False, f"the jwk is not a key joserfc can read: {error!r}")
        else:
            result.add(6, "signature", None if "jwk" not in header else False, "no jwk to verify with")
        signed = False
        if key is not None:
            if not alg_ok:
                result.add(6, "signature", None, "not verified: the alg is refused (step 5)")
            else:
                try:
                    signed = jws.validate_compact(obj, key, algorithms=SUPPORTED_ALGS)
                    result.add(6, "signature", signed, "verified with the header's jwk" if signed else "bad signature")
                except (JoseError, ValueError, TypeError) as error:
                    result.add(6, "signature", False, f"{error!r}")

        # 7. the jwk holds no private key.
        if isinstance(jwk, dict):
            private = [m for m in PRIVATE_MEMBERS if m in jwk]
            is_private = key is not None and getattr(key, "is_private", False)
            ok = not private and not is_private and jwk.get("kty") != "oct"
            result.add(7, "jwk_public", ok, "public key" if ok else
                       f"private members {private}" if private else f"kty {jwk.get('kty')!r} is not a public key")
            if key is not None:
                try:
                    result.jkt = key.thumbprint()
                except (JoseError, ValueError, KeyError, TypeError):
                    result.jkt = None
                by_hand = thumbprint_by_hand(jwk)
                if result.jkt != by_hand:
                    result.add(7, "jwk_thumbprint", False, f"joserfc {result.jkt!r} but RFC 7638 by hand {by_hand!r}")
        else:
            result.add(7, "jwk_public", None, "no jwk")

        # 8. htm
        # A claim that is missing failed step 3; the steps that need it are not taken.
        htm = claims.get("htm")
        if htm is None:
            result.add(8, "htm", None, "no htm (step 3)")
        else:
            result.add(8, "htm", htm == method, f"htm {htm!r}, request {method}")

        # 9. htu
        htu = claims.get("htu")
        result.htu_expected = normalized_url(url)
        result.htu_exact = htu == result.htu_expected
        matches = isinstance(htu, str) and normalized_url(htu) is not None and normalized_url(htu) == result.htu_expected
        if htu is None:
            result.add(9, "htu", None, "no htu (step 3)")
        else:
            result.add(9, "htu", matches, f"htu {htu!r}, request {result.htu_expected!r}"
                       + ("" if not matches or result.htu_exact else " (equal once normalised)"))

        # 10. nonce
        nonce = claims.get("nonce")
        if require_nonce:
            ok = self.nonces.valid(nonce)
            result.add(10, "nonce", ok, "a nonce this server issued" if ok else
                       "no nonce" if nonce is None else f"nonce {nonce!r} was not issued here or has expired")
        else:
            result.add(10, "nonce", None, "not required" + (f" (nonce {nonce!r} sent)" if nonce is not None else ""))

        # 11. iat within the window.
        iat = claims.get("iat")
        if isinstance(iat, (int, float)) and not isinstance(iat, bool):
            age = now - iat
            ok = -IAT_FUTURE <= age <= IAT_PAST
            result.add(11, "iat", ok, f"iat {iat}, {age:.1f} s before the server's clock "
                       f"(window: {IAT_PAST} s before, {IAT_FUTURE} s after)")
        else:
            result.add(11, "iat", None if iat is None else False, "no iat (step 3)" if iat is None else f"iat {iat!r} is not a number")

        # 12. with an access token: ath, and the key the token is bound to.
        ath = claims.get("ath")
        if access_token is not None:
            expected = access_token_hash(access_token)
            if ath is None:
                result.add(12, "ath", None, "no ath (step 3)")
            else:
                result.add(12, "ath", ath == expected, "the SHA-256 of the presented token" if ath == expected else
                           f"ath {ath!r} is not the presented token's hash")
            result.add(12, "binding", bound_jkt is not None and result.jkt == bound_jkt,
                       "the token is bound to this key" if bound_jkt is not None and result.jkt == bound_jkt else
                       "the token is not DPoP-bound" if bound_jkt is None else
                       f"the token is bound to {bound_jkt}, the proof's key is {result.jkt}")
        else:
            result.add(12, "ath", None, "no access token presented" + (" (yet an ath was sent)" if ath is not None else ""))

        # §11.1: a jti once, remembered for proofs whose signature verified.
        jti = claims.get("jti")
        if isinstance(jti, str) and jti:
            with self.lock:
                seen = jti in self.jtis
                if signed and not seen:
                    self.jtis[jti] = now
            result.add(11.1, "jti_unique", not seen, "first use" if not seen else f"jti {jti!r} was used before")
        else:
            result.add(11.1, "jti_unique", None if jti is None else False, "no jti (step 3)" if jti is None else f"jti {jti!r}")
        return result
