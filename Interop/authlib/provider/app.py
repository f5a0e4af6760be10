"""A client-credentials authorization server built on Authlib's Flask integration.

    create_app(base_url) -> Flask app      (serve.py binds, then calls this with http://127.0.0.1:PORT)

Authlib does the OAuth work: `AuthorizationServer` with `ClientCredentialsGrant` (RFC 6749 §4.4),
client authentication by `client_secret_basic`, `client_secret_post` (Authlib's built-ins) and
`private_key_jwt` (Authlib's RFC 7523 `JWTBearerClientAssertion`, registered under that name),
`RevocationEndpoint` (RFC 7009), and a `ResourceProtector` with a `BearerTokenValidator` behind
`/api/whoami`. What is ours: the client and token records (in memory), the metadata document,
and the loopback-only admin routes the suite uses to register keys, change lifetimes and read
what clients sent.

Issuer: the origin (base_url, no path). Endpoints:

    GET  /.well-known/oauth-authorization-server   RFC 8414 metadata
    GET  /.well-known/openid-configuration         the same document (a client may try either)
    POST /oauth/token                              client_credentials only
    POST /oauth/revoke                             RFC 7009; the client authenticates as at the token endpoint
    GET  /api/whoami                               Bearer token -> 200 {"active": true, "client_id", "scope", ...}
                                                   or 401 {"active": false, "error": "invalid_token", "known",
                                                   "expired", "revoked", "client_id"}

Admin (answered only to 127.0.0.1 / ::1):

    PUT  /admin/clients/<client_id>/jwks            body: a JWK Set {"keys": [...]} or one JWK; public
                                                    P-256 keys only (a private member is refused, 400)
    PUT  /admin/clients/<client_id>/token-lifetime  body: {"seconds": N} or {"seconds": null} (the default)
    GET  /admin/clients/<client_id>                 the client's settings (never its secret)
    GET  /admin/requests[?client_id=ID&since=N]     what clients sent to /oauth/token and /oauth/revoke, in
                                                    order: {"seq", "path", "client_id", "method",
                                                    "form_keys", "assertion": {"header", "claims"} | null,
                                                    "status", "error", "error_description"}; never a secret,
                                                    token or signature

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

from flask import Flask, jsonify, request
from joserfc.jwk import KeySet

from authlib.integrations.flask_oauth2 import AuthorizationServer, ResourceProtector
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, InvalidClientError, TokenMixin, grants
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7523 import JWTBearerClientAssertion

log = logging.getLogger("authlib-provider")

SCOPES = ["read", "write"]
AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt"]
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}


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
    def __init__(self, access_token, client_id, scope, expires_in, auth_method):
        self.access_token = access_token
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
                "expired": self.is_expired(), "revoked": self.revoked}


class Store:
    """Clients, tokens, seen assertion ids and the request record; one lock (the server is threaded)."""

    def __init__(self, default_lifetime):
        self.lock = threading.Lock()
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
                token["expires_in"], getattr(oauth_request, "auth_method", None))

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
    store = Store(int(os.environ.get("AUTHLIB_TOKEN_LIFETIME", "3600")))

    app = Flask("authlib-provider")
    app.config["OAUTH2_SCOPES_SUPPORTED"] = SCOPES
    server = AuthorizationServer(app, query_client=store.client, save_token=store.save_token)
    # Authlib's Bearer generator, without refresh tokens, with the client's lifetime.
    server.register_token_generator("default", BearerTokenGenerator(
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
        return jsonify(metadata)

    def recorded(path, respond):
        entry = _what_was_sent(path)
        response = respond()
        entry["status"] = response.status_code
        if response.status_code != 200:
            body = response.get_json(silent=True) or {}
            entry["error"], entry["error_description"] = body.get("error"), body.get("error_description")
        store.record(entry)
        return response

    @app.post("/oauth/token")
    def token():
        return recorded("/oauth/token", server.create_token_response)

    @app.post("/oauth/revoke")
    def revoke():
        return recorded("/oauth/revoke", lambda: server.create_endpoint_response("revocation"))

    @app.get("/api/whoami")
    def whoami():
        try:
            found = protector.acquire_token()
        except OAuth2Error as error:
            value = request.headers.get("Authorization", "")
            known = store.token(value[7:]) if value[:7].lower() == "bearer " else None
            body = {"active": False, "error": error.error, "known": known is not None}
            if known:
                body.update({k: v for k, v in known.describe().items() if k in ("client_id", "expired", "revoked")})
            return jsonify(body), 401, {"WWW-Authenticate": 'Bearer error="invalid_token"'}
        return jsonify({"active": True, **found.describe()})

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

