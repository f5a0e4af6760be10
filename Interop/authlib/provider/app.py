"""A client-credentials authorization server built on Authlib's Flask integration.

    create_app(base_url) -> Flask app      (serve.py binds, then calls this with http://127.0.0.1:PORT)

Authlib does the OAuth work: `AuthorizationServer` with `ClientCredentialsGrant` (RFC 6749 §4.4),
client authentication by `client_secret_basic`, `client_secret_post` (Authlib's built-ins) and
`private_key_jwt` (Authlib's RFC 7523 `JWTBearerClientAssertion`, registered under that name),
`RevocationEndpoint` (RFC 7009), and a `ResourceProtector` with a `BearerTokenValidator` behind
`/api/whoami`. What is ours: the client and token records (in memory), the metadata document,
the loopback-only admin routes the suite uses to register keys, change lifetimes and read
what clients sent, and DPoP (RFC 9449: Authlib 1.9 has no server side for it): every DPoP proof
is verified step by step with joserfc (dpop.py) and recorded with the result of each check.

Issuer: the origin (base_url, no path). Endpoints:

    GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
    GET  /.well-known/openid-configuration         the same document (a client may try either)
    POST /oauth/token                              client_credentials only
    POST /oauth/revoke                             RFC 7009; the client authenticates as at the token endpoint
    GET  /api/whoami                               Bearer token -> 200 {"active": true, "client_id", "scope", ...}
                                                   or 401 {"active": false, "error": "invalid_token", "known",
                                                   "expired", "revoked", "client_id"}; a DPoP-bound token: only
                                                   as `Authorization: DPoP TOKEN` with a proof (ath, the bound key)

DPoP ($AUTHLIB_DPOP at start, PUT /admin/dpop while running): "off" (the default: a proof is
verified and recorded, then ignored: Bearer tokens, as a server without DPoP), "on" (a proof that
verifies binds the token: token_type "DPoP", the proof key's RFC 7638 thumbprint kept with it;
a proof that fails: 400 invalid_dpop_proof; no proof: a Bearer token), "nonce" (as on, and every
proof must carry a nonce this server issued: 400 use_dpop_nonce / 401 at /api/whoami, with
`DPoP-Nonce`, which every answer to a proved request then carries). Proofs are checked at /oauth/token,
/oauth/revoke (no ath: no token is presented as a credential) and /api/whoami (ath and binding).

Admin (answered only to 127.0.0.1 / ::1):

    PUT  /admin/clients/<client_id>/jwks            body: a JWK Set {"keys": [...]} or one JWK; public
                                                    P-256 keys only (a private member is refused, 400)
    PUT  /admin/clients/<client_id>/token-lifetime  body: {"seconds": N} or {"seconds": null} (the default)
    GET  /admin/clients/<client_id>                 the client's settings (never its secret)
    GET  /admin/requests[?client_id=ID&since=N]     what clients sent to /oauth/token and /oauth/revoke, in
                                                    order: {"seq", "path", "client_id", "method",
                                                    "form_keys", "assertion": {"header", "claims"} | null,
                                                    "status", "error", "error_description", "token_type" (200
                                                    at /oauth/token), "dpop": {"proof", "valid", "jkt"} | null};
                                                    never a secret, token or signature
    GET  /admin/dpop                                {"mode", "algs"}
    PUT  /admin/dpop                                body: {"mode": "off" | "on" | "nonce"}
    GET  /admin/dpop-proofs[?since=N&path=P]        every DPoP proof received, in order: {"seq", "path",
                                                    "http_method", "mode", "header" (a jwk's private members
                                                    masked), "claims", "jkt", "htu_expected", "htu_exact",
                                                    "checks": [{"step", "check", "ok", "detail"}], "valid",
                                                    "failed", "outcome", "status", "nonce_sent"}; never the
                                                    proof itself (its signature) nor a token
    GET  /admin/tokens[?client_id=ID&since=N]       the tokens issued, in order: {"seq", "client_id",
                                                    "token_type", "jkt", "expired", "revoked", ...}; never a
                                                    token

Clients (secrets from the environment, defaults shown), each allowed scopes "read write" (the
default when none is asked for), grant type client_credentials only, and exactly one
authentication method, enforced at both endpoints:

    cv-basic  client_secret_basic  $AUTHLIB_BASIC_SECRET (cv-basic-secret-1)
    cv-post   client_secret_post   $AUTHLIB_POST_SECRET  (cv-post-secret-1)
    cv-jwt    private_key_jwt      ES256 assertions; no key until one is PUT to /admin/clients/cv-jwt/jwks

Access tokens live $AUTHLIB_TOKEN_LIFETIME seconds (default 3600; per client with the admin
route); no refresh tokens. A client assertion's `aud` must be the token endpoint URL exactly
(`get_audiences`), at both endpoints; its `jti` is accepted once.
"""

import base64
import json
import logging
import os
import secrets
import threading
import time

from flask import Flask, g, jsonify, make_response, request
from joserfc.jwk import KeySet

from authlib.integrations.flask_oauth2 import AuthorizationServer, ResourceProtector
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, InvalidClientError, TokenMixin, grants
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion

from dpop import SUPPORTED_ALGS, ProofVerifier

log = logging.getLogger("authlib-provider")

SCOPES = ["read", "write"]
AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt"]
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
DPOP_MODES = ("off", "on", "nonce")


class Client(ClientMixin):
    def __init__(self, client_id, method, secret=None):
        self.client_id = client_id
        self.token_endpoint_auth_method = method
        self.client_secret = secret
        self.scope = " ".join(SCOPES)
        self.jwks = None            # a joserfc KeySet (private_key_jwt)
        self.token_lifetime = None  # seconds; None: the server's default

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return None

    def get_allowed_scope(self, scope):
        if not scope:
            return self.scope  # RFC 6749 §3.3: the pre-defined default
        allowed = set(self.scope.split())
        return " ".join(s for s in scope.split() if s in allowed)

    def check_redirect_uri(self, redirect_uri):
        return False

    def check_client_secret(self, client_secret):
        return self.client_secret is not None and secrets.compare_digest(
            self.client_secret.encode(), client_secret.encode())

    def check_endpoint_auth_method(self, method, endpoint):
        # One method per client, at the token endpoint and the revocation endpoint alike.
        return method == self.token_endpoint_auth_method

    def check_response_type(self, response_type):
        return False

    def check_grant_type(self, grant_type):
        return grant_type == "client_credentials"

    def settings(self):
        return {"client_id": self.client_id, "token_endpoint_auth_method": self.token_endpoint_auth_method,
                "scope": self.scope, "token_lifetime": self.token_lifetime,
                "jwks": self.jwks.as_dict() if self.jwks else None}


class Token(TokenMixin):
    def __init__(self, access_token, client_id, scope, expires_in, auth_method, jkt=None):
        self.access_token = access_token
        self.jkt = jkt  # RFC 7638 thumbprint of the DPoP key the token is bound to; None: a Bearer token
        self.client_id = client_id
        self.scope = scope
        self.issued_at = time.time()
        self.expires_in = expires_in
        self.auth_method = auth_method
        self.revoked = False

    def check_client(self, client):
        return self.client_id == client.get_client_id()

    def get_scope(self):
        return self.scope

    def get_expires_in(self):
        return self.expires_in

    def is_expired(self):
        return time.time() >= self.issued_at + self.expires_in

    def is_revoked(self):
        return self.revoked

    def describe(self):
        return {"client_id": self.client_id, "scope": self.scope, "auth_method": self.auth_method,
                "issued_at": int(self.issued_at), "expires_at": int(self.issued_at + self.expires_in),
                "expires_in": max(0, int(self.issued_at + self.expires_in - time.time())),
                "expired": self.is_expired(), "revoked": self.revoked,
                "token_type": "DPoP" if self.jkt else "Bearer", "jkt": self.jkt}


class Store:
    """Clients, tokens, seen assertion ids and the request record; one lock (the server is threaded)."""

    def __init__(self, default_lifetime, dpop_mode):
        self.lock = threading.Lock()
        self.dpop_mode = dpop_mode
        self.verifier = ProofVerifier()
        self.proofs = []
        self.default_lifetime = default_lifetime
        self.clients = {c.client_id: c for c in (
            Client("cv-basic", "client_secret_basic", os.environ.get("AUTHLIB_BASIC_SECRET", "cv-basic-secret-1")),
            Client("cv-post", "client_secret_post", os.environ.get("AUTHLIB_POST_SECRET", "cv-post-secret-1")),
            Client("cv-jwt", "private_key_jwt"),
        )}
        self.tokens = {}
        self.jtis = {}  # (sub, jti) -> until
        self.requests = []

    def client(self, client_id):
        return self.clients.get(client_id)

    def lifetime(self, client):
        return client.token_lifetime if client.token_lifetime is not None else self.default_lifetime

    def save_token(self, token, oauth_request):
        with self.lock:
            self.tokens[token["access_token"]] = Token(
                token["access_token"], oauth_request.client.get_client_id(), token.get("scope"),
                token["expires_in"], getattr(oauth_request, "auth_method", None),
                jkt=g.get("dpop_jkt") if token.get("token_type") == "DPoP" else None)

    def token(self, access_token):
        with self.lock:
            return self.tokens.get(access_token)

    def first_use_of(self, sub, jti, until):
        with self.lock:
            now = time.time()
            for key in [k for k, t in self.jtis.items() if t < now]:
                del self.jtis[key]
            if (sub, jti) in self.jtis:
                return False
            self.jtis[(sub, jti)] = until
            return True

    def record(self, entry):
        with self.lock:
            entry["seq"] = len(self.requests)
            self.requests.append(entry)

    def record_proof(self, entry):
        with self.lock:
            entry["seq"] = len(self.proofs)
            self.proofs.append(entry)
            return entry


class PrivateKeyJWT(JWTBearerClientAssertion):
    """Authlib's RFC 7523 client authentication under the name RFC 8414 lists: the assertion is
    verified with the client's registered keys (kid from the header, or the only key), its `aud`
    must be the token endpoint URL, its `jti` is accepted once, `exp` is required (60 s leeway,
    Authlib's default)."""

    CLIENT_AUTH_METHOD = "private_key_jwt"

    def __init__(self, store, token_endpoint):
        super().__init__(validate_jti=True)
        self.store = store
        self.token_endpoint = token_endpoint

    def get_audiences(self):
        return [self.token_endpoint]

    def resolve_client_public_key(self, client):
        if not client.jwks:
            raise InvalidClientError(description="The client has no registered key.")
        return client.jwks

    def validate_jti(self, claims, jti):
        # Kept until the assertion could no longer pass the exp check anyway.
        return self.store.first_use_of(claims["sub"], jti, float(claims.get("exp", time.time())) + self.leeway + 1)


class ClientCredentialsGrant(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = AUTH_METHODS

    def __init__(self, server, store):
        super().__init__(server)
        self.store = store

    def query_token(self, token_string, token_type_hint):
        # Only access tokens exist here; a refresh_token hint is ignored (RFC 7009 §2.1 lets it be).
        return self.store.token(token_string)

    def revoke_token(self, token, oauth_request):
        with self.store.lock:
            token.revoked = True


class TokenGenerator(BearerTokenGenerator):
    """Authlib's Bearer generator; the token is typed "DPoP" when the request's DPoP proof
    verified and DPoP is on (the token endpoint's gate put the key's thumbprint in flask.g)."""

    def generate(self, *arguments, **keywords):
        token = super().generate(*arguments, **keywords)
        if g.get("dpop_jkt"):
            token["token_type"] = "DPoP"
        return token


class Validator(BearerTokenValidator):
    def __init__(self, store):
        super().__init__()
        self.store = store

    def authenticate_token(self, token_string):
        return self.store.token(token_string)


def _b64json(part):
    try:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except ValueError:
        return None


def _what_was_sent(path):
    """The client authentication a request carried, for /admin/requests: never a secret or signature."""
    form = request.form
    method, client_id, assertion = None, form.get("client_id"), None
    header = request.headers.get("Authorization", "")
    if header[:6].lower() == "basic ":
        method = "client_secret_basic"
        try:
            client_id = base64.b64decode(header[6:]).decode().split(":", 1)[0]
        except ValueError:
            client_id = None
    elif form.get("client_assertion"):
        method = "private_key_jwt"
        parts = form["client_assertion"].split(".")
        if len(parts) == 3:
            assertion = {"header": _b64json(parts[0]), "claims": _b64json(parts[1])}
            if isinstance(assertion["claims"], dict) and isinstance(assertion["claims"].get("sub"), str):
                client_id = assertion["claims"]["sub"]
    elif form.get("client_secret"):
        method = "client_secret_post"
    return {"path": path, "time": time.time(), "client_id": client_id, "method": method,
            "basic_header": method == "client_secret_basic", "form_keys": sorted(form.keys()),
            "grant_type": form.get("grant_type"), "scope": form.get("scope"), "assertion": assertion}


def create_app(base_url):
    base_url = base_url.rstrip("/")
    token_endpoint = base_url + "/oauth/token"
    revocation_endpoint = base_url + "/oauth/revoke"
    dpop_mode = os.environ.get("AUTHLIB_DPOP", "off")
    if dpop_mode not in DPOP_MODES:
        raise SystemExit(f"AUTHLIB_DPOP: one of {', '.join(DPOP_MODES)}, not {dpop_mode!r}")
    store = Store(int(os.environ.get("AUTHLIB_TOKEN_LIFETIME", "3600")), dpop_mode)

    app = Flask("authlib-provider")
    app.config["OAUTH2_SCOPES_SUPPORTED"] = SCOPES
    server = AuthorizationServer(app, query_client=store.client, save_token=store.save_token)
    # Authlib's Bearer generator, without refresh tokens, with the client's lifetime.
    server.register_token_generator("default", TokenGenerator(
        lambda **_: secrets.token_urlsafe(32), None, lambda client, grant_type: store.lifetime(client)))
    server.register_grant(ClientCredentialsGrant)
    server.register_client_auth_method("private_key_jwt", PrivateKeyJWT(store, token_endpoint))
    server.register_endpoint(Revocation(server, store))
    protector = ResourceProtector()
    protector.register_token_validator(Validator(store))

    metadata = {
        "issuer": base_url,
        "token_endpoint": token_endpoint,
        "revocation_endpoint": revocation_endpoint,
        "grant_types_supported": ["client_credentials"],
        # RFC 8414 makes this member required; there is no authorization endpoint here.
        "response_types_supported": [],
        "scopes_supported": SCOPES,
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
        "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
        "revocation_endpoint_auth_signing_alg_values_supported": ["ES256"],
    }

    @app.get("/.well-known/oauth-authorization-server")
    @app.get("/.well-known/openid-configuration")
    def discovery():
        if store.dpop_mode == "off":
            return jsonify(metadata)
        return jsonify({**metadata, "dpop_signing_alg_values_supported": SUPPORTED_ALGS})

    # --- DPoP (RFC 9449) -------------------------------------------------------------------------

    def check_proof(path, access_token=None, bound_jkt=None):
        """Verifies the request's DPoP header(s) (dpop.py, every step of RFC 9449 §4.3) and records
        the proof and each check's result for /admin/dpop-proofs. None when the request has none."""
        values = request.headers.getlist("DPoP")
        if not values:
            return None, None
        mode = store.dpop_mode
        result = store.verifier.verify(values, request.method, base_url + request.path,
                                       require_nonce=mode == "nonce", access_token=access_token, bound_jkt=bound_jkt)
        entry = store.record_proof({"path": path, "http_method": request.method, "time": time.time(), "mode": mode,
                                    "access_token_presented": access_token is not None, **result.record(),
                                    "outcome": None, "status": None})
        g.dpop_entry = entry
        log.info("DPoP proof #%d at %s: %s", entry["seq"], path, "valid" if result.valid else result.describe_failures())
        return result, entry

    def finish_proof(entry, outcome, response):
        """What the server did with a recorded proof: the outcome, the status, the DPoP-Nonce it sent."""
        if entry is not None:
            with store.lock:
                entry.update(outcome=outcome, status=response.status_code, nonce_sent=response.headers.get("DPoP-Nonce"))
        return response

    def with_nonce(response):
        if store.dpop_mode == "nonce":
            response.headers["DPoP-Nonce"] = store.verifier.nonces.current_nonce()
        return response

    def proof_refused(result, server_kind="Authorization"):
        """(error, description) for a proof the server must not accept, or None."""
        if result is None or result.valid:
            return None
        if result.only_nonce_failed:
            return "use_dpop_nonce", f"{server_kind} server requires nonce in DPoP proof"
        return "invalid_dpop_proof", result.describe_failures()

    def dpop_gate(path, respond):
        """The token and revocation endpoints: a DPoP proof, when sent, is verified and recorded
        whatever the mode. Off: nothing more (Bearer tokens). On / nonce: a proof that fails is
        refused before Authlib sees the request (400 invalid_dpop_proof, or use_dpop_nonce when
        only the nonce is missing or stale); one that verifies binds the token issued."""
        result, entry = check_proof(path)
        if result is None or store.dpop_mode == "off":
            return finish_proof(entry, "ignored (DPoP off)", respond())
        refused = proof_refused(result)
        if refused:
            response = with_nonce(make_response(jsonify({"error": refused[0], "error_description": refused[1]}), 400))
            response.headers["Cache-Control"] = "no-store"
            return finish_proof(entry, refused[0], response)
        g.dpop_jkt = result.jkt
        response = with_nonce(respond())
        body = response.get_json(silent=True) or {}
        return finish_proof(entry, ("bound" if body.get("token_type") == "DPoP" else "accepted")
                            if response.status_code == 200 else "accepted; the request failed", response)

    def recorded(path, respond):
        entry = _what_was_sent(path)
        response = respond()
        entry["status"] = response.status_code
        body = response.get_json(silent=True) or {}
        if response.status_code != 200:
            entry["error"], entry["error_description"] = body.get("error"), body.get("error_description")
        elif path == "/oauth/token":
            entry["token_type"] = body.get("token_type")
        proof = g.get("dpop_entry")
        entry["dpop"] = None if proof is None else {"proof": proof["seq"], "valid": proof["valid"], "jkt": proof["jkt"]}
        store.record(entry)
        return response

    def gated(path, respond):
        def run():
            return dpop_gate(path, respond)
        return recorded(path, run)

    @app.post("/oauth/token")
    def token():
        return gated("/oauth/token", server.create_token_response)

    @app.post("/oauth/revoke")
    def revoke():
        return gated("/oauth/revoke", lambda: server.create_endpoint_response("revocation"))

    def refuse_token(error, description, known=None, scheme="Bearer", extra=None):
        body = {"active": False, "error": error, "known": known is not None}
        if known:
            body.update({k: v for k, v in known.describe().items() if k in ("client_id", "expired", "revoked", "token_type")})
        body.update(extra or {})
        if scheme == "DPoP":
            challenge = f'DPoP error="{error}", error_description="{description}", algs="{" ".join(SUPPORTED_ALGS)}"'
        else:
            challenge = 'Bearer error="invalid_token"'  # as before DPoP
        return with_nonce(make_response(jsonify(body), 401, {"WWW-Authenticate": challenge}))

    @app.get("/api/whoami")
    def whoami():
        value = request.headers.get("Authorization", "")
        if value[:5].lower() == "dpop ":
            return whoami_dpop(value[5:].strip())
        try:
            found = protector.acquire_token()
        except OAuth2Error as error:
            known = store.token(value[7:]) if value[:7].lower() == "bearer " else None
            return refuse_token(error.error, None, known)
        if found.jkt:
            # RFC 9449 §7.2: a DPoP-bound token is never accepted as a Bearer token.
            return refuse_token("invalid_token", "DPoP-bound token presented as Bearer", found, scheme="DPoP",
                                extra={"bound": True})
        return jsonify({"active": True, **found.describe()})

    def whoami_dpop(access_token):
        """`Authorization: DPoP TOKEN` with a DPoP proof: the token live and bound, and the proof
        verified as at the token endpoint plus ath and the key binding (§4.3 step 12, §7.1)."""
        found = store.token(access_token)
        result, entry = check_proof("/api/whoami", access_token=access_token, bound_jkt=found.jkt if found else None)
        if found is None or found.is_expired() or found.is_revoked():
            return finish_proof(entry, "invalid_token", refuse_token("invalid_token", "the token is not live", found, scheme="DPoP"))
        if not found.jkt:
            return finish_proof(entry, "invalid_token", refuse_token("invalid_token", "a Bearer token presented as DPoP", found, scheme="DPoP"))
        if result is None:
            return refuse_token("invalid_dpop_proof", "no DPoP proof", found, scheme="DPoP")
        refused = proof_refused(result, "Resource")
        if refused:
            return finish_proof(entry, refused[0], refuse_token(refused[0], refused[1].replace('"', "'"), found, scheme="DPoP",
                                                                extra={"dpop_proof": entry["seq"]}))
        return finish_proof(entry, "accepted", with_nonce(make_response(jsonify({"active": True, **found.describe(),
                                                                                 "dpop_proof": entry["seq"]}))))

    def admin_only():
        if request.remote_addr not in LOOPBACK:
            return jsonify({"error": "loopback only"}), 403
        return None

    def admin_client(client_id):
        client = store.client(client_id)
        if client is None:
            return None, (jsonify({"error": "no such client"}), 404)
        return client, admin_only()

    @app.put("/admin/clients/<client_id>/jwks")
    def put_jwks(client_id):
        client, refused = admin_client(client_id)
        if refused:
            return refused
        body = request.get_json(silent=True)
        keys = body.get("keys") if isinstance(body, dict) and "keys" in body else [body]
        if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys):
            return jsonify({"error": "a JWK Set or a JWK, as JSON"}), 400
        for k in keys:
            if k.get("kty") != "EC" or k.get("crv") != "P-256" or "d" in k:
                return jsonify({"error": "public P-256 keys only (kty EC, crv P-256, no d)"}), 400
        try:
            key_set = KeySet.import_key_set({"keys": keys}) if keys else None
        except Exception as error:  # joserfc's errors and ValueError alike: a key it cannot read
            return jsonify({"error": f"not a usable JWK: {error}"}), 400
        with store.lock:
            client.jwks = key_set
        log.info("%s: %d key(s) registered: %s", client_id, len(keys),
                 ", ".join(k.kid for k in key_set) if key_set else "none")
        return jsonify(client.settings())

    @app.put("/admin/clients/<client_id>/token-lifetime")
    def put_lifetime(client_id):
        client, refused = admin_client(client_id)
        if refused:
            return refused
        seconds = (request.get_json(silent=True) or {}).get("seconds")
        if seconds is not None and (not isinstance(seconds, int) or seconds < 1):
            return jsonify({"error": "seconds: a positive integer or null"}), 400
        with store.lock:
            client.token_lifetime = seconds
        log.info("%s: token lifetime %s", client_id, seconds if seconds is not None else "default")
        return jsonify(client.settings())

    @app.get("/admin/dpop")
    def get_dpop():
        return admin_only() or jsonify({"mode": store.dpop_mode, "algs": SUPPORTED_ALGS})

    @app.put("/admin/dpop")
    def put_dpop():
        refused = admin_only()
        if refused:
            return refused
        mode = (request.get_json(silent=True) or {}).get("mode")
        if mode not in DPOP_MODES:
            return jsonify({"error": f"mode: one of {', '.join(DPOP_MODES)}"}), 400
        with store.lock:
            store.dpop_mode = mode
        log.info("DPoP: %s", mode)
        return jsonify({"mode": mode, "algs": SUPPORTED_ALGS})

    @app.get("/admin/tokens")
    def get_tokens():
        """The tokens issued since number N, in order of issue (describe(): never the token itself)."""
        refused = admin_only()
        if refused:
            return refused
        client_id = request.args.get("client_id")
        since = int(request.args.get("since", "0"))
        with store.lock:
            issued = list(store.tokens.values())
        return jsonify([{"seq": n, **t.describe()} for n, t in enumerate(issued)
                        if n >= since and (client_id is None or t.client_id == client_id)])

    @app.get("/admin/dpop-proofs")
    def get_proofs():
        refused = admin_only()
        if refused:
            return refused
        since = int(request.args.get("since", "0"))
        path = request.args.get("path")
        with store.lock:
            entries = [dict(e) for e in store.proofs[since:] if path is None or e["path"] == path]
        return jsonify(entries)

    @app.get("/admin/clients/<client_id>")
    def get_client(client_id):
        client, refused = admin_client(client_id)
        return refused or jsonify(client.settings())

    @app.get("/admin/requests")
    def get_requests():
        refused = admin_only()
        if refused:
            return refused
        client_id = request.args.get("client_id")
        since = int(request.args.get("since", "0"))
        with store.lock:
            entries = [e for e in store.requests[since:] if client_id is None or e["client_id"] == client_id]
        return jsonify(entries)

    app.config["CV_STORE"] = store
    app.config["CV_METADATA"] = metadata
    return app

