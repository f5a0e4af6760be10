#!/usr/bin/env python3
"""The vault's client-credentials accounts (RFC 6749 §4.4) against an Authlib authorization server.

    suite.py VAULT_BINARY ORIGIN WORK_DIR

Runs the `vault` command (a child process each time, as a daemon's start script would, in a
session of its own: no terminal to prompt on) against a running provider (serve.sh; ORIGIN is
its issuer), each case in a fresh vault, and checks what the provider itself then says: its
`/api/whoami` names the client a live access token was issued to (401 with `expired` or
`revoked` otherwise), and `/admin/requests` shows how each token request authenticated (the
method, the form's parameter names, a client assertion's header and claims). Exits non-zero if
any case fails; prints one line per case with its time, then a summary.

The DPoP cases (RFC 9449) switch the provider's DPoP mode (PUT /admin/dpop) and read what it
recorded of every proof the vault sent and of each RFC 9449 §4.3 check (/admin/dpop-proofs); a
proof `vault dpop-proof` prints is also verified here, with joserfc, independently of the provider.

Needs the provider venv's packages: requests, cryptography for the client keys, joserfc (Authlib's
JOSE library) for the DPoP proofs.
"""

import base64
import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import time

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc import jws
from joserfc.jwk import ECKey, JWKRegistry, OctKey

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
import interop  # noqa: E402  (../common/interop.py, standard library only)
VAULT, ORIGIN, WORK = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3]
TOKEN_ENDPOINT = ORIGIN + "/oauth/token"
REVOCATION_ENDPOINT = ORIGIN + "/oauth/revoke"
WHOAMI = ORIGIN + "/api/whoami"
# As provider/app.py reads them.
SECRETS = {
    "cv-basic": os.environ.get("AUTHLIB_BASIC_SECRET", "cv-basic-secret-1"),
    "cv-post": os.environ.get("AUTHLIB_POST_SECRET", "cv-post-secret-1"),
}
# Bounds for a loaded 2-core CI machine; a passing run takes a fraction of each.
COMMAND_SECONDS = 120
REGISTRATION_TIMEOUT = "2m"
# The short access-token lifetime of the re-obtaining case: real time, so kept small.
SHORT_LIFETIME = 3 * max(1, int(float(os.environ.get("TEST_TIME_SCALE", "1"))))


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def short(text, limit=600):
    text = str(text or "").strip()
    return text if len(text) <= limit else text[:limit] + "…"


class Vault:
    """One vault file and key file, and the environment a service's start script would give `vault`."""

    def __init__(self, name):
        self.dir = os.path.join(WORK, name)
        os.makedirs(os.path.join(self.dir, "home"), mode=0o700)
        os.chmod(self.dir, 0o700)
        self.path = os.path.join(self.dir, "vault.db")
        self.key = os.path.join(self.dir, "vault.key")
        self.env = {
            "PATH": "/usr/bin:/bin",
            "HOME": os.path.join(self.dir, "home"),
            "XDG_RUNTIME_DIR": self.dir,  # no agent here, and none found elsewhere
            "VAULT_PATH": self.path,
            "VAULT_KEY_FILE": self.key,
            "LANG": "C.UTF-8",
            "NO_PROXY": "127.0.0.1,localhost,::1", "no_proxy": "127.0.0.1,localhost,::1",
        }
        self.ok("init", "--key-file", self.key)

    def file(self, name, content, mode=0o600):
        path = os.path.join(self.dir, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb" if isinstance(content, bytes) else "w") as f:
            f.write(content)
        os.chmod(path, mode)  # whatever the umask
        return path

    def secret_file(self, client_id, secret=None):
        return self.file(f"{client_id}.secret", (secret or SECRETS[client_id]) + "\n")

    def run(self, *arguments):
        return subprocess.run([VAULT, *arguments], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              env=self.env, timeout=COMMAND_SECONDS, start_new_session=True)

    def ok(self, *arguments):
        done = self.run(*arguments)
        check(done.returncode == 0, f"vault {' '.join(arguments)} exited {done.returncode}: {short(done.stderr)}")
        return done

    def json(self, *arguments):
        return json.loads(self.ok(*arguments, "--json").stdout)

    def token(self, *arguments):
        return self.ok("token", *arguments).stdout.strip()

    def accounts(self):
        return self.json("accounts", "list")

    def only_account(self):
        accounts = self.accounts()
        check(len(accounts) == 1, f"expected one account, the vault has {len(accounts)}")
        return accounts[0]

    def background(self, *arguments):
        """`vault ARGUMENTS` left running (a login waiting for its key to be registered):
        output to files, so nothing blocks on a full pipe."""
        return Background(self, arguments)


class Background:
    def __init__(self, vault, arguments):
        self.arguments = arguments
        self.out_path = os.path.join(vault.dir, "background.out")
        self.err_path = os.path.join(vault.dir, "background.err")
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.child = subprocess.Popen([VAULT, *arguments], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                          env=vault.env, start_new_session=True)
        # run.sh ends these (each leads its own process group) if the suite itself is stopped.
        if os.environ.get("AUTHLIB_SUITE_PIDS"):
            with open(os.environ["AUTHLIB_SUITE_PIDS"], "a") as pids:
                pids.write(f"{self.child.pid}\n")

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def wait_for_json(self, path):
        """The JSON document the child writes to path, once whole; fails if the child ends first."""
        deadline = time.monotonic() + COMMAND_SECONDS
        while time.monotonic() < deadline:
            try:
                with open(path) as f:
                    return json.load(f)
            except (OSError, ValueError):
                pass
            if self.child.poll() is not None:
                raise Failure(f"vault {self.arguments[0]} exited {self.child.returncode} before writing {os.path.basename(path)}: "
                              f"{short(self.stderr())}")
            time.sleep(0.05)
        raise Failure(f"vault {self.arguments[0]} wrote no {os.path.basename(path)} in {COMMAND_SECONDS} s")

    def finish(self):
        try:
            self.child.wait(timeout=COMMAND_SECONDS)
        except subprocess.TimeoutExpired:
            raise Failure(f"vault {' '.join(self.arguments[:2])} still waiting after {COMMAND_SECONDS} s: {short(self.stderr())}")
        check(self.child.returncode == 0, f"vault {' '.join(self.arguments[:2])} exited {self.child.returncode}: {short(self.stderr())}")

    def end(self):
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()


# --- the provider's word ---------------------------------------------------------------------

PROVIDER = requests.Session()
PROVIDER.trust_env = False  # loopback only: never a proxy from the environment


def whoami(token):
    """200 and {"client_id", "scope", ...} for a live token; 401 and {"known", "expired", "revoked"} otherwise."""
    response = PROVIDER.get(ORIGIN + "/api/whoami", headers={"Authorization": "Bearer " + token}, timeout=30)
    return response.status_code, response.json()


def check_token(token, client_id):
    status, who = whoami(token)
    check(status == 200 and who.get("client_id") == client_id, f"the provider says of the token: {status} {who}")
    return who


def admin(method, path, body=None):
    response = PROVIDER.request(method, ORIGIN + "/admin/" + path, json=body, timeout=30)
    check(response.status_code == 200, f"provider admin {method} {path}: {response.status_code} {short(response.text)}")
    return response.json()


def register_keys(*jwks):
    admin("PUT", "clients/cv-jwt/jwks", {"keys": list(jwks)})


def set_lifetime(client_id, seconds):
    admin("PUT", f"clients/{client_id}/token-lifetime", {"seconds": seconds})


def sent(client_id, since=0, path="/oauth/token"):
    """What client_id's requests to path carried, since request number `since`."""
    return [e for e in admin("GET", f"requests?client_id={client_id}&since={since}") if e["path"] == path]


def mark():
    return len(admin("GET", "requests"))


def set_dpop(mode):
    """The provider's DPoP mode: off (proofs verified and recorded, never acted on), on (a proof
    that verifies binds the token), nonce (on, and a server nonce required in every proof)."""
    admin("PUT", "dpop", {"mode": mode})


def proofs(since=0, path=None):
    """The DPoP proofs the provider received since proof number `since` (at `path`), each with
    its header, claims, thumbprint (jkt) and the result of every RFC 9449 §4.3 check."""
    return admin("GET", f"dpop-proofs?since={since}" + (f"&path={path}" if path else ""))


def mark_proofs():
    return len(proofs())


def tokens_issued(client_id, since=0):
    return admin("GET", f"tokens?client_id={client_id}&since={since}")


def mark_tokens():
    return len(admin("GET", "tokens"))


# --- keys ---------------------------------------------------------------------------------------

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def thumbprint(jwk):
    """RFC 7638: SHA-256 of the required members in lexicographic order, no whitespace."""
    canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode()).digest())


def new_key():
    """A P-256 key: (private key, its public JWK as the vault should publish it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    numbers = key.public_key().public_numbers()
    jwk = {"kty": "EC", "crv": "P-256", "x": b64url(numbers.x.to_bytes(32, "big")),
           "y": b64url(numbers.y.to_bytes(32, "big"))}
    jwk.update(kid=thumbprint(jwk), alg="ES256", use="sig")
    return key, jwk


def pem(key, sec1=False):
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL if sec1 else serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def check_public_jwk(jwk, where):
    """The vault's public JWK: P-256, ES256, for signing, kid its RFC 7638 thumbprint, no private part."""
    check(isinstance(jwk, dict), f"{where}: not a JSON object: {short(jwk)}")
    check("d" not in jwk, f"{where} holds the PRIVATE key (member d)")
    check(jwk.get("kty") == "EC" and jwk.get("crv") == "P-256" and jwk.get("x") and jwk.get("y"), f"{where}: {jwk}")
    check(jwk.get("alg") == "ES256" and jwk.get("use") == "sig", f"{where}: alg/use: {jwk}")
    check(jwk.get("kid") == thumbprint(jwk), f"{where}: kid {jwk.get('kid')!r} is not the RFC 7638 thumbprint {thumbprint(jwk)}")


def client_key(vault, account_id):
    """`vault accounts client-key ACCOUNT --json`: the account's public JWK."""
    shown = vault.json("accounts", "client-key", account_id)
    jwk = shown.get("jwk") if isinstance(shown, dict) else None
    check(shown.get("kid") == (jwk or {}).get("kid"), f"vault accounts client-key --json: kid and jwk disagree: {short(shown)}")
    check_public_jwk(jwk, "vault accounts client-key --json (jwk)")
    return jwk


def same_key(a, b):
    return all(a.get(k) == b.get(k) for k in ("kty", "crv", "x", "y", "kid"))


SEEN_JTIS = set()


def check_assertions(entries, kid):
    """Each private_key_jwt request as RFC 7523 §3 and the vault's design say: ES256 signed with
    the key `kid` names, iss = sub = the client id, aud the token endpoint URL exactly, exp one
    minute after iat, a jti never used before."""
    check(entries, "no private_key_jwt request reached the provider")
    for entry in entries:
        assertion = entry.get("assertion") or {}
        header, claims = assertion.get("header") or {}, assertion.get("claims") or {}
        check(entry["method"] == "private_key_jwt" and not entry["basic_header"] and "client_secret" not in entry["form_keys"],
              f"not a bare client assertion: {entry}")
        check(header.get("alg") == "ES256" and header.get("kid") == kid, f"assertion header {header}, expected ES256 and kid {kid}")
        check(claims.get("iss") == claims.get("sub") == "cv-jwt", f"assertion iss/sub: {claims}")
        check(claims.get("aud") in (TOKEN_ENDPOINT, [TOKEN_ENDPOINT]), f"assertion aud {claims.get('aud')!r}, expected {TOKEN_ENDPOINT}")
        check(isinstance(claims.get("iat"), (int, float)) and claims.get("exp") == claims.get("iat") + 60,
              f"assertion iat/exp: {claims.get('iat')} / {claims.get('exp')} (expected exp = iat + 60)")
        jti = claims.get("jti")
        check(isinstance(jti, str) and jti and jti not in SEEN_JTIS, f"assertion jti {jti!r} missing or used before")
        SEEN_JTIS.add(jti)


# --- DPoP proofs (RFC 9449) -------------------------------------------------------------------

SEEN_PROOF_JTIS = set()
# The §4.3 steps every proof must pass (the provider records them all; ath and binding where a
# token is presented, nonce where one is required).
PROOF_CHECKS = ("one_header", "jwt", "required_claims", "typ", "alg", "signature", "jwk_public", "htm", "htu", "iat",
                "jti_unique")


def ath(token):
    return b64url(hashlib.sha256(token.encode("ascii")).digest())


def check_public_dpop_jwk(jwk, where):
    check(isinstance(jwk, dict) and jwk.get("kty") == "EC" and jwk.get("crv") == "P-256" and jwk.get("x") and jwk.get("y"),
          f"{where}: the proof's jwk is not a P-256 public key: {jwk}")
    check(not set(jwk) & {"d", "p", "q", "dp", "dq", "qi", "oth", "k"}, f"{where}: the proof's jwk holds a private member: {sorted(jwk)}")


def check_recorded_proof(entry, url, method="POST", token=None, challenged=False):
    """One proof as the provider recorded it: every §4.3 check passed (a challenged proof: all
    but the nonce, which it lacks); htu the URL exactly, htm the method, ath only with a token;
    its jti never seen before in this run; its jkt the RFC 7638 thumbprint of its jwk."""
    where = f"the DPoP proof #{entry.get('seq')} to {entry.get('path')}"
    header, claims = entry.get("header") or {}, entry.get("claims") or {}
    results = {c["check"]: c for c in entry.get("checks", [])}
    failed = [f"{name}: {results[name]['detail']}" for name in results if results[name]["ok"] is False]
    expected_failed = ["nonce"] if challenged else []
    check(entry.get("failed") == expected_failed, f"{where} failed {failed or 'no check'}; expected to fail {expected_failed or 'none'}")
    for name in PROOF_CHECKS:
        check(results.get(name, {}).get("ok") is True, f"{where}: check {name} not passed: {results.get(name)}")
    if token is not None:
        for name in ("ath", "binding"):
            check(results.get(name, {}).get("ok") is True, f"{where}: check {name} not passed: {results.get(name)}")
    check(header.get("typ") == "dpop+jwt" and header.get("alg") == "ES256", f"{where}: header {header}")
    check_public_dpop_jwk(header.get("jwk"), where)
    check(entry.get("jkt") == thumbprint(header["jwk"]), f"{where}: the provider's jkt {entry.get('jkt')} is not the jwk's "
                                                         f"RFC 7638 thumbprint {thumbprint(header['jwk'])}")
    check(claims.get("htu") == url and entry.get("htu_exact") is True, f"{where}: htu {claims.get('htu')!r}, expected {url!r} exactly")
    check(claims.get("htm") == method, f"{where}: htm {claims.get('htm')!r}, expected {method}")
    if token is None:
        check("ath" not in claims, f"{where}: an ath with no access token presented: {claims}")
    else:
        check(claims.get("ath") == ath(token), f"{where}: ath {claims.get('ath')!r} is not the token's SHA-256")
    if challenged:
        check("nonce" not in claims, f"{where}: challenged for a nonce it carried: {claims}")
    jti = claims.get("jti")
    check(isinstance(jti, str) and jti and jti not in SEEN_PROOF_JTIS, f"{where}: jti {jti!r} missing or used before in this run")
    SEEN_PROOF_JTIS.add(jti)
    return entry["jkt"]


def verify_proof_here(proof, method, url, token, jkt):
    """A proof `vault dpop-proof` printed, verified here with joserfc, without the provider:
    a JWS typed dpop+jwt, ES256, signed by the P-256 key in its header (whose RFC 7638 thumbprint
    is `jkt`), no private member; htm, htu exactly; ath the SHA-256 of `token`; iat within a
    minute of now; a jti new to this run. Returns the claims."""
    try:
        obj = jws.extract_compact(proof.encode("ascii"))
        header, claims = obj.protected, json.loads(obj.payload)
    except Exception as error:  # joserfc's DecodeError, a payload that is not JSON
        raise Failure(f"vault dpop-proof printed no well-formed JWS: {error!r}")
    check(header.get("typ") == "dpop+jwt" and header.get("alg") == "ES256", f"vault dpop-proof: header {header}")
    check_public_dpop_jwk(header.get("jwk"), "vault dpop-proof")
    key = JWKRegistry.import_key(header["jwk"])
    try:
        jws.deserialize_compact(proof, key, algorithms=["ES256"])
    except Exception as error:  # BadSignatureError and the like
        raise Failure(f"vault dpop-proof: the signature does not verify with the header's jwk: {error!r}")
    check(key.thumbprint() == thumbprint(header["jwk"]) == jkt,
          f"vault dpop-proof: the proof's key {thumbprint(header['jwk'])} is not the one the token is bound to ({jkt})")
    check(claims.get("htm") == method and claims.get("htu") == url, f"vault dpop-proof: htm/htu {claims}, expected {method} {url}")
    check(claims.get("ath") == ath(token), f"vault dpop-proof: ath {claims.get('ath')!r}, expected the printed token's SHA-256")
    iat = claims.get("iat")
    check(isinstance(iat, (int, float)) and -5 <= time.time() - iat <= 60, f"vault dpop-proof: iat {iat}, now {time.time():.0f}")
    check(isinstance(claims.get("jti"), str) and claims["jti"] and claims["jti"] not in SEEN_PROOF_JTIS,
          f"vault dpop-proof: jti {claims.get('jti')!r} missing or used before")
    SEEN_PROOF_JTIS.add(claims["jti"])
    return claims


def whoami_dpop(token, proof):
    """/api/whoami with `Authorization: DPoP TOKEN` and the proof: (status, body, headers)."""
    response = PROVIDER.get(WHOAMI, headers={"Authorization": "DPoP " + token, "DPoP": proof}, timeout=30)
    return response.status_code, response.json(), response.headers


class HandMadeProofs:
    """Proofs built here with joserfc, to see the provider's verifier refuse what RFC 9449 §4.3
    refuses: a P-256 key, and proofs for it that are right but for what a test changes."""

    def __init__(self):
        self.key = ECKey.generate_key("P-256")
        self.public = self.key.as_dict(private=False)
        self.jkt = thumbprint(self.public)

    def make(self, url, method="POST", header=None, claims=None, drop=(), sign_with=None):
        header = {"typ": "dpop+jwt", "alg": "ES256", "jwk": self.public, **(header or {})}
        claims = {"jti": secrets.token_urlsafe(16), "htm": method, "htu": url, "iat": int(time.time()), **(claims or {})}
        for name in drop:
            claims.pop(name, None)
        return jws.serialize_compact(header, json.dumps(claims), sign_with or self.key, algorithms=[header["alg"]])

    def unsigned(self, url):
        """alg none: no signature at all."""
        header = {"typ": "dpop+jwt", "alg": "none", "jwk": self.public}
        claims = {"jti": secrets.token_urlsafe(16), "htm": "POST", "htu": url, "iat": int(time.time())}
        return ".".join(b64url(json.dumps(part).encode()) for part in (header, claims)) + "."


def token_request_with(proof):
    """cv-basic's client_credentials request carrying `proof` as its DPoP header (None: no header).
    Returns (status, body, headers, the provider's record of the proof or None)."""
    since = mark_proofs()
    response = PROVIDER.post(TOKEN_ENDPOINT, data={"grant_type": "client_credentials"}, auth=("cv-basic", SECRETS["cv-basic"]),
                             headers={} if proof is None else {"DPoP": proof}, timeout=30)
    recorded = proofs(since)
    return response.status_code, response.json(), response.headers, (recorded[-1] if recorded else None)


def dpop_login_args(client_id, vault):
    return login_args(client_id, "--client-auth", "client_secret_post", "--client-secret-file", vault.secret_file(client_id), "--dpop")


def login_args(client_id, *extra, issuer=True):
    place = ["--issuer", ORIGIN] if issuer else ["--token-endpoint", TOKEN_ENDPOINT]
    return ["login", "--client-credentials", *place, "--client-id", client_id, *extra]


def generated_key_login(vault, jwk_name="pub.json", *extra):
    """`vault login ... --generate-client-key --jwk-out FILE` in the background; the key it
    writes is checked and registered at the provider, and the login must then complete."""
    register_keys()  # none: the login must wait for this key
    jwk_path = os.path.join(vault.dir, jwk_name)
    login = vault.background(*login_args("cv-jwt", "--generate-client-key", "--jwk-out", jwk_path,
                                         "--registration-timeout", REGISTRATION_TIMEOUT, *extra))
    try:
        jwk = login.wait_for_json(jwk_path)
        check_public_jwk(jwk, os.path.basename(jwk_path))
        register_keys(jwk)
        login.finish()
    finally:
        login.end()
    return jwk


def nothing_stored(vault, what):
    accounts = vault.accounts()
    check(accounts == [], f"{what}, yet the vault holds {len(accounts)} account(s)")


def absent_from(value, *texts):
    return all(value not in text for text in texts)


# --- the cases ----------------------------------------------------------------------------------

CASES = interop.Cases()
case = CASES.case


@case("client_secret_basic: discovery from the issuer, HTTP Basic; the token is cv-basic's at the provider")
def secret_basic(v):
    since = mark()
    v.ok(*login_args("cv-basic", "--client-secret-file", v.secret_file("cv-basic"), "--label", "build-bot"))
    account = v.only_account()
    check(account.get("label") == "build-bot", f"label: {account.get('label')!r}")
    who = check_token(v.token(), "cv-basic")
    check(who["auth_method"] == "client_secret_basic", f"{who}")
    requests_sent = sent("cv-basic", since)
    check(requests_sent and all(e["basic_header"] and "client_secret" not in e["form_keys"] for e in requests_sent),
          f"not HTTP Basic alone: {requests_sent}")


@case("client_secret_post: id and secret in the form; cv-post refuses HTTP Basic, and that login stores nothing")
def secret_post(v):
    refused = v.run(*login_args("cv-post", "--client-auth", "client_secret_basic", "--client-secret-file", v.secret_file("cv-post")))
    check(refused.returncode != 0, "a login with the method the client is not registered for succeeded")
    nothing_stored(v, f"the login exited {refused.returncode}")
    since = mark()
    v.ok(*login_args("cv-post", "--client-auth", "client_secret_post", "--client-secret-file", v.secret_file("cv-post")))
    who = check_token(v.token(), "cv-post")
    check(who["auth_method"] == "client_secret_post", f"{who}")
    requests_sent = sent("cv-post", since)
    check(requests_sent and all(not e["basic_header"] and {"client_id", "client_secret"} <= set(e["form_keys"]) for e in requests_sent),
          f"not client_secret_post: {requests_sent}")


@case("private_key_jwt, imported key (PKCS#8 and SEC1 PEM, mode 0600): ES256 assertions as RFC 7523 says; mode 0644 refused")
def imported_key(v):
    key, jwk = new_key()
    register_keys(jwk)
    path = v.file("client.pem", pem(key), 0o600)
    since = mark()
    v.ok(*login_args("cv-jwt", "--client-key-file", path))
    account = v.only_account()
    check(same_key(client_key(v, account["id"]), jwk), f"vault accounts client-key is not the imported key's public JWK {jwk}")
    check_token(v.token(), "cv-jwt")
    # Imported, not referred to: the vault signs without the file.
    os.unlink(path)
    check_token(v.token("--min-ttl", "2h"), "cv-jwt")
    check_assertions(sent("cv-jwt", since), jwk["kid"])

    sec1_key, sec1_jwk = new_key()
    register_keys(sec1_jwk)
    sec1 = Vault("imported-sec1")
    since = mark()
    sec1.ok(*login_args("cv-jwt", "--client-key-file", sec1.file("client.pem", pem(sec1_key, sec1=True), 0o600)))
    check_token(sec1.token(), "cv-jwt")
    check_assertions(sent("cv-jwt", since), sec1_jwk["kid"])

    loose = Vault("imported-0644")
    since = mark()
    refused = loose.run(*login_args("cv-jwt", "--client-key-file", loose.file("client.pem", pem(sec1_key), 0o644)))
    check(refused.returncode != 0, "a private key readable by group and others was accepted")
    check(re.search(r"mode|permission|0644|readable", refused.stderr, re.I), f"the refusal does not say why: {short(refused.stderr)}")
    nothing_stored(loose, f"the login exited {refused.returncode}")
    check(sent("cv-jwt", since) == [], "the refused key was used to ask for a token")


@case("private_key_jwt, key generated in the vault: its public JWK to --jwk-out, the login waits until it is registered")
def generated_key(v):
    since = mark()
    jwk = generated_key_login(v)
    account = v.only_account()
    check(same_key(client_key(v, account["id"]), jwk), "vault accounts client-key differs from the JWK written at login")
    check_token(v.token(), "cv-jwt")
    successes = [e for e in sent("cv-jwt", since) if e["status"] == 200]
    check_assertions(successes, jwk["kid"])


@case("client key rotation: --rotate writes the new JWK, waits until the provider takes it, then signs with it alone")
def key_rotation(v):
    old = generated_key_login(v)
    account = v.only_account()["id"]
    new_path = os.path.join(v.dir, "new.json")
    rotation = v.background("accounts", "client-key", account, "--rotate", "--jwk-out", new_path,
                            "--registration-timeout", REGISTRATION_TIMEOUT)
    try:
        new = rotation.wait_for_json(new_path)
        check_public_jwk(new, "new.json")
        check(new["kid"] != old["kid"], "--rotate wrote the old key")
        register_keys(old, new)  # both, as a provider would during a rollover
        rotation.finish()
    finally:
        rotation.end()
    check(same_key(client_key(v, account), new), "vault accounts client-key does not show the new key after the rotation")
    register_keys(new)  # the old key retired
    since = mark()
    check_token(v.token("--min-ttl", "2h"), "cv-jwt")
    check_assertions(sent("cv-jwt", since), new["kid"])


@case("re-obtained when due, never refreshed: one token while it lasts; a new one once the provider let it expire")
def reobtained(v):
    v.ok(*login_args("cv-basic", "--client-secret-file", v.secret_file("cv-basic")))
    first = v.token()
    since = mark()
    check(v.token() == first, "a second `vault token` printed another token while the first had an hour left")
    check(sent("cv-basic", since) == [], "`vault token` asked the provider for a token while it held a valid one")
    account = v.only_account()
    refresh = (account.get("tokens") or {}).get("refresh_token")
    check(refresh in (None, False) or (isinstance(refresh, dict) and not refresh.get("present")), f"a refresh token is stored: {refresh}")
    described = v.json("token")
    check(described.get("refresh_token") in (None, False) or described.get("refresh_token") == {"present": False},
          f"vault token --json: {described}")

    set_lifetime("cv-basic", SHORT_LIFETIME)
    try:
        short_lived = Vault("reobtained-short")
        short_lived.ok(*login_args("cv-basic", "--client-secret-file", short_lived.secret_file("cv-basic")))
        token = short_lived.token()
        check_token(token, "cv-basic")
        deadline = time.monotonic() + SHORT_LIFETIME + 10
        while whoami(token)[0] == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        status, who = whoami(token)
        check(status == 401 and who.get("expired") is True, f"the provider did not let the token expire: {status} {who}")
        again = short_lived.token()
        check(again != token, "the expired token was printed again")
        check_token(again, "cv-basic")
    finally:
        set_lifetime("cv-basic", None)


@case("a wrong client secret: refused, nothing stored, the secret never printed")
def wrong_secret(v):
    wrong = "wrong-" + secrets.token_urlsafe(18)
    since = mark()
    refused = v.run(*login_args("cv-basic", "--client-secret-file", v.secret_file("cv-basic", wrong)))
    check(refused.returncode != 0, "a wrong secret signed in")
    check(absent_from(wrong, refused.stdout, refused.stderr), "the wrong secret is in the vault's output")
    check(any(e["status"] != 200 for e in sent("cv-basic", since)), "the provider was never asked")
    nothing_stored(v, f"the login exited {refused.returncode}")


@case("a client secret is never taken from the command line, nor prompted for without a terminal (exit 64)")
def secret_not_in_argv(v):
    value = "argv-" + secrets.token_urlsafe(18)
    for form in (["--client-secret", value], ["--client-secret=" + value]):
        refused = v.run(*login_args("cv-basic", *form))
        check(refused.returncode != 0, f"{form[0].split('=')[0]} on the command line was accepted")
        check(absent_from(value, refused.stdout, refused.stderr), f"the secret given as {form[0].split('=')[0]} is echoed: "
                                                                  f"{short(refused.stderr)}")
    unprompted = v.run(*login_args("cv-basic"))
    check(unprompted.returncode == 64, f"no secret and no terminal: exit {unprompted.returncode}, expected 64: {short(unprompted.stderr)}")
    nothing_stored(v, "every login was refused")


@case("--token-endpoint without --issuer: no discovery; the assertion's aud is the URL given")
def token_endpoint_only(v):
    key, jwk = new_key()
    register_keys(jwk)
    since = mark()
    v.ok(*login_args("cv-jwt", "--client-key-file", v.file("client.pem", pem(key), 0o600), issuer=False))
    check_token(v.token(), "cv-jwt")
    check_assertions(sent("cv-jwt", since), jwk["kid"])


@case("accounts remove revokes the access token at the provider (RFC 7009), the client authenticated as at the token endpoint")
def remove_revokes(v):
    v.ok(*login_args("cv-basic", "--client-secret-file", v.secret_file("cv-basic"), "--label", "basic"))
    basic = v.token()
    key, jwk = new_key()
    register_keys(jwk)
    v.ok(*login_args("cv-jwt", "--client-key-file", v.file("client.pem", pem(key), 0o600), "--label", "jwt"))
    jwt = v.token()
    accounts = {a["label"]: a["id"] for a in v.accounts()}
    for label, token, client_id in (("basic", basic, "cv-basic"), ("jwt", jwt, "cv-jwt")):
        check_token(token, client_id)
        since = mark()
        removed = v.json("accounts", "remove", accounts[label], "--yes")
        check(removed.get("revoked") is True, f"accounts remove ({client_id}): {removed}")
        status, who = whoami(token)
        check(status == 401 and who.get("revoked") is True, f"{client_id}'s token after accounts remove: {status} {who}")
        revocations = sent(client_id, since, "/oauth/revoke")
        check(revocations and revocations[-1]["status"] == 200, f"{client_id}'s revocation requests: {revocations}")
        if client_id == "cv-jwt":
            check_assertions(revocations, jwk["kid"])
    check(v.accounts() == [], "accounts remain after removing both")



@case("the provider's DPoP verifier (no vault): proofs made here that each break one RFC 9449 §4.3 rule are "
      "refused for that rule alone")
def dpop_verifier(v):
    maker, other = HandMadeProofs(), HandMadeProofs()
    set_dpop("on")
    try:
        status, body, _, entry = token_request_with(maker.make(TOKEN_ENDPOINT))
        check(status == 200 and body.get("token_type") == "DPoP" and entry and entry["valid"] and entry["jkt"] == maker.jkt,
              f"a right proof: {status} {body.get('token_type') or body} {entry and entry['failed']}")
        token = body["access_token"]
        replayed = maker.make(TOKEN_ENDPOINT)
        token_request_with(replayed)
        oct_key = OctKey.generate_key(256)
        old = {"iat": int(time.time()) - 3600}
        wrong = {
            "one_header": f"{maker.make(TOKEN_ENDPOINT)},{maker.make(TOKEN_ENDPOINT)}",  # two fields, as the server joins them
            "jwt": "not-a.jws",
            "required_claims": maker.make(TOKEN_ENDPOINT, drop=("htm",)),
            "typ": maker.make(TOKEN_ENDPOINT, header={"typ": "JWT"}),
            "alg": maker.unsigned(TOKEN_ENDPOINT),
            "alg, jwk_public": maker.make(TOKEN_ENDPOINT, header={"alg": "HS256", "jwk": oct_key.as_dict()}, sign_with=oct_key),
            "signature": maker.make(TOKEN_ENDPOINT, sign_with=other.key),
            "jwk_public ": maker.make(TOKEN_ENDPOINT, header={"jwk": maker.key.as_dict(private=True)}),
            "htm": maker.make(TOKEN_ENDPOINT, method="GET"),
            "htu": maker.make(REVOCATION_ENDPOINT),
            "iat": maker.make(TOKEN_ENDPOINT, claims=old),
            "iat ": maker.make(TOKEN_ENDPOINT, claims={"iat": int(time.time()) + 120}),
            "jti_unique": replayed,
        }
        for expected, proof in wrong.items():
            status, body, _, entry = token_request_with(proof)
            expected = [name.strip() for name in expected.split(",")]
            check(status == 400 and body.get("error") == "invalid_dpop_proof", f"a proof failing {expected}: {status} {body}")
            check(entry and entry["failed"] == expected, f"a proof failing {expected}: the provider says it failed "
                                                         f"{entry and entry['failed']}")
        # At the resource: ath, the key the token is bound to, htm/htu of the GET.
        for expected, proof in {"ath": maker.make(WHOAMI, "GET", claims={"ath": ath(token + "x")}),
                                "binding": other.make(WHOAMI, "GET", claims={"ath": ath(token)}),
                                "htu": maker.make(TOKEN_ENDPOINT, "GET", claims={"ath": ath(token)}),
                                "required_claims": maker.make(WHOAMI, "GET")}.items():
            since = mark_proofs()
            status, body, _ = whoami_dpop(token, proof)
            entry = proofs(since)[-1]
            check(status == 401 and body.get("error") == "invalid_dpop_proof" and entry["failed"] == [expected],
                  f"a proof at /api/whoami failing {expected}: {status} {body}, the provider says it failed {entry['failed']}")
        status, body, _ = whoami_dpop(token, maker.make(WHOAMI, "GET", claims={"ath": ath(token)}))
        check(status == 200 and body.get("jkt") == maker.jkt, f"a right proof at /api/whoami: {status} {body}")
        status, body = whoami(token)
        check(status == 401 and body.get("bound") is True, f"the bound token as Bearer: {status} {body}")

        set_dpop("nonce")
        status, body, headers, entry = token_request_with(maker.make(TOKEN_ENDPOINT))
        nonce = headers.get("DPoP-Nonce")
        check(status == 400 and body.get("error") == "use_dpop_nonce" and nonce and entry["failed"] == ["nonce"],
              f"no nonce: {status} {body} {entry and entry['failed']}")
        status, body, _, entry = token_request_with(maker.make(TOKEN_ENDPOINT, claims={"nonce": "not-" + nonce}))
        check(status == 400 and body.get("error") == "use_dpop_nonce" and entry["failed"] == ["nonce"],
              f"a nonce never issued: {status} {body} {entry and entry['failed']}")
        status, body, headers, entry = token_request_with(maker.make(TOKEN_ENDPOINT, claims={"nonce": nonce}))
        check(status == 200 and body.get("token_type") == "DPoP" and headers.get("DPoP-Nonce") and entry["valid"],
              f"with the nonce: {status} {body.get('token_type') or body}")
        status, body, _, entry = token_request_with(None)
        check(status == 200 and body.get("token_type") == "Bearer" and entry is None, f"no proof at all: {status} {body}")
    finally:
        set_dpop("off")


@case("DPoP, a provider that ignores it: the --dpop login refuses the Bearer answer (exit 76), stores nothing; "
      "its proofs still pass every RFC 9449 §4.3 check")
def dpop_ignored(v):
    set_dpop("off")
    since, proofs_since, tokens_since = mark(), mark_proofs(), mark_tokens()
    refused = v.run(*dpop_login_args("cv-post", v))
    nothing_stored(v, f"the login exited {refused.returncode}")
    asked = sent("cv-post", since)
    check(asked and all(e["status"] == 200 and e.get("token_type") == "Bearer" for e in asked),
          f"the token requests: {asked} (expected the provider to issue a Bearer token)")
    check(all(e.get("dpop") for e in asked), f"a token request without a DPoP proof: {asked}")
    at_token = proofs(proofs_since, "/oauth/token")
    check(len(at_token) == len(asked), f"{len(at_token)} proof(s) recorded for {len(asked)} token request(s)")
    jkts = {check_recorded_proof(entry, TOKEN_ENDPOINT) for entry in at_token}
    check(all(e["outcome"] == "ignored (DPoP off)" for e in at_token), f"outcomes: {[e['outcome'] for e in at_token]}")
    check(len(jkts) == 1, f"the login's proofs name {len(jkts)} keys")
    # The Bearer token the vault would not keep: revoked (with a proof by the same key), not left live.
    for entry in proofs(proofs_since, "/oauth/revoke"):
        check(check_recorded_proof(entry, REVOCATION_ENDPOINT) in jkts, f"the revocation's proof is by another key: {entry}")
    issued = tokens_issued("cv-post", tokens_since)
    check(issued and all(t["revoked"] for t in issued), f"a token the vault refused to store is still live: {issued}")
    check(refused.returncode == 76, f"exit {refused.returncode}, expected 76 (the provider issued a Bearer token to a DPoP "
                                    f"request): {short(refused.stderr)}")
    check(re.search(r"dpop", refused.stderr, re.I) and re.search(r"bearer", refused.stderr, re.I),
          f"the refusal names neither DPoP nor the Bearer token: {short(refused.stderr)}")


@case("DPoP-bound client: the provider binds the token to the proof's key; vault dpop-proof's proof is accepted "
      "at /api/whoami (and verifies here); the token as Bearer is refused")
def dpop_bound(v):
    set_dpop("on")
    try:
        since, proofs_since, tokens_since = mark(), mark_proofs(), mark_tokens()
        v.ok(*dpop_login_args("cv-post", v))
        described = v.json("token")
        check(described.get("type") == "DPoP", f"vault token --json: type {described.get('type')!r}, expected DPoP")
        token = described["token"]
        asked = sent("cv-post", since)
        check(asked and asked[-1]["status"] == 200 and asked[-1].get("token_type") == "DPoP", f"the token requests: {asked}")
        at_token = proofs(proofs_since, "/oauth/token")
        check(len(at_token) == len(asked), f"{len(at_token)} proof(s) recorded for {len(asked)} token request(s)")
        jkts = {check_recorded_proof(entry, TOKEN_ENDPOINT) for entry in at_token}
        check(len(jkts) == 1, f"the login's proofs name {len(jkts)} keys")
        jkt = jkts.pop()
        issued = tokens_issued("cv-post", tokens_since)
        check(len(issued) == 1 and issued[0]["token_type"] == "DPoP" and issued[0]["jkt"] == jkt,
              f"the provider's record of the token: {issued} (expected one, DPoP, bound to {jkt})")

        # A proof for the script's own request, as `vault dpop-proof --json` prints it.
        proofs_since = mark_proofs()
        out = v.json("dpop-proof", "GET", WHOAMI)
        check(out.get("token") == token and out.get("type") == "DPoP" and out.get("account") == described.get("account"),
              f"vault dpop-proof --json: {({k: val for k, val in out.items() if k not in ('proof', 'token')})}, token "
              f"{'the same' if out.get('token') == token else 'another'} as vault token's")
        verify_proof_here(out["proof"], "GET", WHOAMI, token, jkt)
        status, who, _ = whoami_dpop(token, out["proof"])
        check(status == 200 and who.get("client_id") == "cv-post" and who.get("jkt") == jkt and who.get("token_type") == "DPoP",
              f"the provider's /api/whoami with the token and the proof: {status} {who}")
        at_whoami = proofs(proofs_since, "/api/whoami")
        check(len(at_whoami) == 1 and at_whoami[0]["outcome"] == "accepted", f"the provider's record: {at_whoami}")
        SEEN_PROOF_JTIS.discard(at_whoami[0]["claims"].get("jti"))  # verified here already: the same proof
        check_recorded_proof(at_whoami[0], WHOAMI, "GET", token=token)
        # The same proof again: a replay the provider must refuse (its jti check at work).
        status, who, _ = whoami_dpop(token, out["proof"])
        check(status == 401 and who.get("error") == "invalid_dpop_proof", f"a replayed proof: {status} {who}")
        # The query and fragment are not part of htu.
        out = v.json("dpop-proof", "GET", WHOAMI + "?verbose=1#top")
        verify_proof_here(out["proof"], "GET", WHOAMI, token, jkt)
        # The bound token without its proof, as a Bearer token.
        status, who = whoami(token)
        check(status == 401 and who.get("bound") is True, f"the DPoP-bound token as Bearer: {status} {who}")

        # accounts remove revokes it, with a proof by the same key.
        proofs_since = mark_proofs()
        removed = v.json("accounts", "remove", described["account"], "--yes")
        check(removed.get("revoked") is True, f"accounts remove: {removed}")
        at_revoke = proofs(proofs_since, "/oauth/revoke")
        check(at_revoke, "the revocation request carried no DPoP proof")
        check(all(check_recorded_proof(entry, REVOCATION_ENDPOINT) == jkt for entry in at_revoke), "a revocation proof by another key")
        check(tokens_issued("cv-post", issued[0]["seq"])[0]["revoked"] is True, "the provider does not report the token revoked")
    finally:
        set_dpop("off")


@case("DPoP nonces (private_key_jwt): challenged with use_dpop_nonce, the login retries once with the nonce; "
      "vault dpop-proof --nonce answers the resource's challenge")
def dpop_nonces(v):
    key, jwk = new_key()
    register_keys(jwk)
    set_dpop("nonce")
    try:
        since, proofs_since = mark(), mark_proofs()
        v.ok(*login_args("cv-jwt", "--client-key-file", v.file("client.pem", pem(key), 0o600), "--dpop"))
        check(v.json("token").get("type") == "DPoP", "vault token --json: not a DPoP token")
        asked = sent("cv-jwt", since)
        check([(e["status"], e.get("error")) for e in asked] == [(400, "use_dpop_nonce"), (200, None)],
              f"the token requests: {[(e['status'], e.get('error')) for e in asked]}, expected one challenge, then the token")
        check(asked[-1].get("token_type") == "DPoP", f"the token issued: {asked[-1]}")
        check_assertions(asked, jwk["kid"])  # a new client assertion (a new jti) for the retry too
        at_token = proofs(proofs_since, "/oauth/token")
        check(len(at_token) == 2, f"{len(at_token)} proof(s) at the token endpoint, expected 2")
        first, second = at_token
        check(first["outcome"] == "use_dpop_nonce" and first["nonce_sent"], f"the first proof: {first['outcome']}, nonce sent "
                                                                           f"{first['nonce_sent']!r}")
        jkt = check_recorded_proof(first, TOKEN_ENDPOINT, challenged=True)
        check(check_recorded_proof(second, TOKEN_ENDPOINT) == jkt, "the retry's proof is by another key")
        check(second["claims"].get("nonce") == first["nonce_sent"],
              f"the retry's nonce {second['claims'].get('nonce')!r} is not the one given ({first['nonce_sent']!r})")
        check(second["outcome"] == "bound", f"the retry: {second['outcome']}")

        # The resource asks for its nonce too: the script passes it to vault dpop-proof --nonce.
        out = v.json("dpop-proof", "GET", WHOAMI)
        status, who, headers = whoami_dpop(out["token"], out["proof"])
        check(status == 401 and who.get("error") == "use_dpop_nonce" and headers.get("DPoP-Nonce"),
              f"a proof without the nonce at /api/whoami: {status} {who}")
        out = v.json("dpop-proof", "GET", WHOAMI, "--nonce", headers["DPoP-Nonce"])
        claims = verify_proof_here(out["proof"], "GET", WHOAMI, out["token"], jkt)
        check(claims.get("nonce") == headers["DPoP-Nonce"], f"vault dpop-proof --nonce: nonce {claims.get('nonce')!r}")
        status, who, _ = whoami_dpop(out["token"], out["proof"])
        check(status == 200 and who.get("client_id") == "cv-jwt" and who.get("jkt") == jkt, f"with the nonce: {status} {who}")
    finally:
        set_dpop("off")


@case("vault dpop-proof for an account with Bearer tokens: exit 76, no proof printed; a login without --dpop sends none")
def dpop_proof_bearer(v):
    proofs_since = mark_proofs()
    v.ok(*login_args("cv-basic", "--client-secret-file", v.secret_file("cv-basic")))
    check(v.json("token").get("type") == "Bearer", "vault token --json: not a Bearer token")
    check(proofs(proofs_since) == [], "a login without --dpop sent a DPoP proof")
    for extra in ([], ["--json"]):
        refused = v.run("dpop-proof", "GET", WHOAMI, *extra)
        check(refused.returncode == 76, f"vault dpop-proof {' '.join(extra)}: exit {refused.returncode}, expected 76: {short(refused.stderr)}")
        check(refused.stdout.strip() == "", f"vault dpop-proof {' '.join(extra)} printed: {short(refused.stdout)}")
    check(proofs(proofs_since) == [], "a proof reached the provider")


def main():
    failed = 0
    started = time.monotonic()
    for title, function in CASES:
        began = time.monotonic()
        try:
            function(Vault(function.__name__.replace("_", "-")))
            print(f"  ok    {time.monotonic() - began:5.1f} s  {title}", flush=True)
        except (Failure, subprocess.TimeoutExpired, requests.RequestException, KeyError, ValueError, OSError) as error:
            failed += 1
            print(f"  FAIL  {time.monotonic() - began:5.1f} s  {title}\n        {error}", flush=True)
    total = time.monotonic() - started
    print(f"Authlib interop: {len(CASES) - failed} of {len(CASES)} cases passed in {total:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
