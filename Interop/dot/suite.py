#!/usr/bin/env python3
"""The vault against django-oauth-toolkit: sign in, refresh and sign out as a user would.

    suite.py VAULT_BINARY ISSUER WORK_DIR

Runs the `vault` command (a child process each time, as a user types it) against a running
DOT provider (serve.sh), with this directory's `xdg-open` first on PATH so browser sign-ins
are driven by browser.py, and checks what a user would: exit codes, what is printed, and what
the provider itself says about each token afterwards (its userinfo endpoint answers 200 for a
live access token and 401 once the grant is revoked; for the client-credentials service account,
which has no user, its introspection endpoint says whether a token is active and whose it is).
Exits non-zero if any case fails; prints one line per case with its time.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
import interop  # noqa: E402  (../common/interop.py, standard library only)
VAULT, ISSUER, WORK = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3]
ORIGIN = ISSUER.rsplit("/o", 1)[0]
USERINFO = ISSUER + "/userinfo/"
DEVICE_ENDPOINT = ISSUER + "/device-authorization/"
INTROSPECT = ISSUER + "/introspect/"
# The confidential client-credentials client provider/serve.py provisions (DOT stores it hashed).
SERVICE_CLIENT = "cv-service"
SERVICE_SECRET = os.environ.get("DOT_SERVICE_SECRET", "cv-service-secret-1")
# Bounds for a loaded 2-core CI machine; a passing run takes a fraction of each.
COMMAND_SECONDS = 120
BROWSER_WAIT = "90s"


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class Vault:
    """One vault file and key, and the environment a user's shell would give `vault`."""

    def __init__(self, name):
        self.dir = os.path.join(WORK, name)
        os.makedirs(os.path.join(self.dir, "home"), mode=0o700)
        os.chmod(self.dir, 0o700)
        self.path = os.path.join(self.dir, "vault.db")
        self.key = os.path.join(self.dir, "vault.key")
        self.browser_log = os.path.join(self.dir, "browser.log")
        self.env = {
            "PATH": HERE + ":/usr/bin:/bin",
            "HOME": os.path.join(self.dir, "home"),
            "VAULT_PATH": self.path,
            "VAULT_KEY_FILE": self.key,
            "DISPLAY": ":cv-interop",  # a display, so `vault login` opens the (scripted) browser
            "DOT_BROWSER_LOG": self.browser_log,
            # The browser keeps its cookies like a profile: only a step-up makes it log in again.
            "DOT_BROWSER_COOKIES": os.path.join(self.dir, "cookies.txt"),
            "LANG": "C.UTF-8",
        }
        for name in ("DOT_VENV", "DOT_BROWSER_PIDS", "TEST_TIME_SCALE"):
            if name in os.environ:
                self.env[name] = os.environ[name]

    def run(self, *arguments, stdin=None, browser_args=None):
        env = dict(self.env)
        if browser_args:
            env["DOT_BROWSER_ARGS"] = browser_args
        done = subprocess.run(
            [VAULT, *arguments], input=stdin, capture_output=True, text=True, env=env, timeout=COMMAND_SECONDS)
        return done

    def ok(self, *arguments, **options):
        done = self.run(*arguments, **options)
        check(done.returncode == 0, f"vault {' '.join(arguments)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def json(self, *arguments, **options):
        return json.loads(self.ok(*arguments, "--json", **options).stdout)

    def token(self, *arguments):
        return self.ok("token", *arguments).stdout.strip()

    def browser_tail(self):
        try:
            with open(self.browser_log) as log:
                return log.read()[-1500:]
        except OSError:
            return "(no browser log)"


PROVIDER = requests.Session()
PROVIDER.trust_env = False  # loopback only: never a proxy from the environment


def userinfo(token):
    """The provider's own word on an access token: 200 and who it is, or 401 once revoked."""
    response = PROVIDER.get(USERINFO, headers={"Authorization": "Bearer " + token}, timeout=30)
    return response.status_code, (response.json() if response.status_code == 200 else None)


def introspect(token):
    """DOT's RFC 7662 answer on a token, asked with cv-service's own credentials (HTTP Basic):
    {"active": true, "client_id", "scope", "exp"[, "username"]} or {"active": false}."""
    response = PROVIDER.post(INTROSPECT, data={"token": token}, auth=(SERVICE_CLIENT, SERVICE_SECRET), timeout=30)
    check(response.status_code == 200, f"introspection: {response.status_code} {response.text[:300]}")
    return response.json()


def device_sign_in(vault, user, *extra):
    """`vault login --device` as a child; the user approves the code it shows in the browser
    (../common/interop.py: its output is read on threads, and the child is ended whatever happens)."""
    return interop.device_sign_in(
        [VAULT, "login", "--issuer", ISSUER, "--client-id", "cv-device", "--device",
         "--device-authorization-endpoint", DEVICE_ENDPOINT, *extra],
        vault.env, [sys.executable, os.path.join(HERE, "browser.py")], user, COMMAND_SECONDS,
        browser_env=dict(os.environ, NO_PROXY="*"), failure=Failure)


CASES = interop.Cases()
case = CASES.case


state = {}


def login_count(v):
    try:
        with open(v.browser_log) as log:
            return log.read().count("login form:")
    except OSError:
        return 0


@case("browser sign-in: registered redirect path, PKCE, consent, a verified ID token; merged discovery finds revocation")
def browser_sign_in(v):
    document = requests.get(ISSUER + "/.well-known/openid-configuration", timeout=30).json()
    check("revocation_endpoint" not in document, "DOT's OpenID document now has a revocation_endpoint: the merge is not tested")
    signed = v.run("login", "--issuer", ISSUER, "--client-id", "cv-browser", "--browser", "--timeout", BROWSER_WAIT, "--json")
    check(signed.returncode == 0, f"exit {signed.returncode}: {signed.stderr.strip()}\nbrowser: {v.browser_tail()}")
    result = json.loads(signed.stdout)
    account = result["account"]
    check(result["subject_verified"] is True, f"subject not verified: {result}")
    check(account["subject"] == "1" and account["label"] == "alice", f"account: {account}")
    check(account["client"]["revocation_endpoint"] == ISSUER + "/revoke_token/", f"revocation endpoint: {account['client']}")
    # DOT lists only client_secret_* for revocation: said up front, as a may.
    check(result["revocation"]["available"] is False and "may refuse" in signed.stderr, f"{result['revocation']} / {signed.stderr}")
    state["alice"] = account["id"]
    status, who = userinfo(v.token())
    check(status == 200 and who["preferred_username"] == "alice", f"userinfo {status} {who}")


@case("a forced refresh (--min-ttl above the token's lifetime) rotates the token; the new one works")
def forced_refresh(v):
    before = v.token()
    after = v.token("--min-ttl", "10m")
    check(after != before, "no refresh happened")
    check(userinfo(after)[0] == 200, "the refreshed token is refused")


@case("step-up: --max-age 0 makes DOT authenticate the user again (prompt=login), though the browser is logged in")
def step_up(v):
    logins = login_count(v)
    again = v.run("login", "--account", state["alice"], "--max-age", "0", "--browser", "--timeout", BROWSER_WAIT)
    check(again.returncode == 0, f"exit {again.returncode}: {again.stderr.strip()}\nbrowser: {v.browser_tail()}")
    check("Signed in again as alice" in again.stdout, again.stdout)
    check(login_count(v) == logins + 1, "the browser was not asked to log in again")


@case("refresh token reuse: a copy of the vault presenting the rotated-away token ends the grant; both exit 80")
def reuse_detection(v):
    copy = Vault("copy")
    v.ok("backup", copy.path)
    shutil.copy(v.key, copy.key)
    v.token("--min-ttl", "10m")  # rotates: the copy now holds a refresh token DOT replaced
    stale = copy.run("token", "--min-ttl", "10m")
    check(stale.returncode == 80, f"the copy's stale refresh: exit {stale.returncode}: {stale.stderr.strip()}")
    fresh = v.run("token", "--min-ttl", "10m")
    check(fresh.returncode == 80, f"after reuse DOT revokes the family: exit {fresh.returncode}: {fresh.stderr.strip()}")


@case("device sign-in: DOT publishes no device endpoint (the error names the option), sends no ID token (userinfo names bob)")
def device_sign_in_case(v):
    missing = v.run("login", "--issuer", ISSUER, "--client-id", "cv-device", "--device")
    check(missing.returncode == 64 and "--device-authorization-endpoint" in missing.stderr, f"{missing.returncode}: {missing.stderr}")
    out, err = device_sign_in(v, "bob")
    check("Signed in as bob" in out, out)
    check("userinfo" in out, f"the subject's source is not said: {out}")
    bob = [a for a in v.json("accounts", "list") if a["label"] == "bob"]
    check(len(bob) == 1 and bob[0]["subject_source"] == "unverified", f"{bob}")
    state["bob"] = bob[0]["id"]
    check(userinfo(v.token())[0] == 200, "bob's token is refused")


@case("sessions end revokes the grant at DOT before wiping it")
def session_end(v):
    token = v.token("--account", state["bob"])
    ended = v.json("sessions", "end", "--account", state["bob"])
    check(ended["revoked"] is True, f"{ended}")
    check(userinfo(token)[0] == 401, "DOT still accepts the token after sessions end")
    check(v.run("token", "--account", state["bob"]).returncode == 80, "the ended session still serves a token")


@case("accounts remove revokes the grant at DOT")
def account_remove(v):
    logins = login_count(v)
    again = v.run("login", "--account", state["alice"], "--browser", "--timeout", BROWSER_WAIT)
    check(again.returncode == 0, f"exit {again.returncode}: {again.stderr.strip()}")
    check(login_count(v) == logins, "without --max-age the logged-in browser was asked to log in again")
    token = v.token("--account", state["alice"])
    removed = v.json("accounts", "remove", state["alice"], "--yes")
    check(removed["revoked"] is True, f"{removed}")
    check(userinfo(token)[0] == 401, "DOT still accepts the token after accounts remove")


@case("export --move hands the grant over (said, not revoked); ending it in the importing vault revokes it")
def export_move(v):
    device_sign_in(v, "bob", "--account", state["bob"])
    other = Vault("other")
    other.ok("init", "--key-file", other.key)
    recipient = other.ok("recipient").stdout.strip()
    exported = v.ok("sessions", "export", "--account", state["bob"], "--to", recipient, "--move")
    check("not revoked" in exported.stderr, f"the move does not say the grant stays alive: {exported.stderr}")
    other.ok("sessions", "import", stdin=exported.stdout)
    token = other.token()
    check(userinfo(token)[0] == 200, "the moved session's token is refused")
    check(v.run("token", "--account", state["bob"]).returncode == 80, "the exporting vault still serves the moved session")
    ended = other.json("sessions", "end")
    check(ended["revoked"] is True and userinfo(token)[0] == 401, f"{ended}")


@case("--redirect-uri http://[::1]/callback: DOT matches the registered path, any port; kept for the next sign-in")
def redirect_ipv6(v):
    signed = v.run("login", "--issuer", ISSUER, "--client-id", "cv-browser", "--browser", "--timeout", BROWSER_WAIT,
                   "--redirect-uri", "http://[::1]/callback", "--json")
    check(signed.returncode == 0, f"exit {signed.returncode}: {signed.stderr.strip()}\nbrowser: {v.browser_tail()}")
    account = json.loads(signed.stdout)["account"]
    again = v.run("login", "--account", account["id"], "--browser", "--timeout", BROWSER_WAIT)
    check(again.returncode == 0, f"exit {again.returncode}: {again.stderr.strip()}")
    with open(v.browser_log) as log:
        redirects = re.findall(r"redirect -> http://\[::1\]:\d+/callback\?", log.read())
    check(len(redirects) >= 2, "the stored redirect URI was not used again")


def service_login(vault, *extra, secret=SERVICE_SECRET):
    secret_file = os.path.join(vault.dir, "service.secret")
    fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return vault.run("login", "--client-credentials", "--issuer", ISSUER, "--client-id", SERVICE_CLIENT,
                     "--client-secret-file", secret_file, *extra)


def service_token_checked(vault):
    token = vault.token()
    answer = introspect(token)
    check(answer.get("active") is True and answer.get("client_id") == SERVICE_CLIENT and "username" not in answer,
          f"DOT's introspection of the service token: {answer}")
    return token


@case("client credentials, client_secret_basic: a wrong secret stores nothing; cv-service's token is active at DOT, no user")
def service_basic(v):
    service = Vault("service-basic")
    service.ok("init", "--key-file", service.key)
    wrong = "wrong-" + os.urandom(9).hex()
    refused = service_login(service, secret=wrong)
    check(refused.returncode != 0, "a wrong client secret signed in")
    check(wrong not in refused.stdout + refused.stderr, "the wrong secret is in the vault's output")
    check(service.json("accounts", "list") == [], "the refused login stored an account")
    signed = service_login(service)
    check(signed.returncode == 0, f"exit {signed.returncode}: {signed.stderr.strip()}")
    service_token_checked(service)
    state["service"] = service


@case("client credentials, client_secret_post: id and secret in the form; the token is cv-service's at DOT")
def service_post(v):
    service = Vault("service-post")
    service.ok("init", "--key-file", service.key)
    signed = service_login(service, "--client-auth", "client_secret_post")
    check(signed.returncode == 0, f"exit {signed.returncode}: {signed.stderr.strip()}")
    service_token_checked(service)


@case("accounts remove revokes the service account's access token at DOT (introspection: inactive)")
def service_remove(v):
    service = state["service"]
    token = service_token_checked(service)
    account = service.json("accounts", "list")[0]["id"]
    removed = service.json("accounts", "remove", account, "--yes")
    check(removed["revoked"] is True, f"{removed}")
    check(introspect(token) == {"active": False}, "DOT still takes the service token after accounts remove")
    check(service.json("accounts", "list") == [], "the account is still there")


def main():
    vault = Vault("main")
    vault.ok("init", "--key-file", vault.key)
    failed = 0
    started = time.monotonic()
    for title, function in CASES:
        began = time.monotonic()
        try:
            function(vault)
            print(f"  ok    {time.monotonic() - began:5.1f} s  {title}", flush=True)
        except (Failure, subprocess.TimeoutExpired, requests.RequestException, KeyError, ValueError) as error:
            failed += 1
            print(f"  FAIL  {time.monotonic() - began:5.1f} s  {title}\n        {error}", flush=True)
    total = time.monotonic() - started
    print(f"django-oauth-toolkit interop: {len(CASES) - failed} of {len(CASES)} cases passed in {total:.0f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
