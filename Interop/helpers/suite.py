#!/usr/bin/env python3
"""The vault's git and docker credential helpers, run by real git and the docker SDK for Python.

    suite.py VAULT_BINARY ISSUER GIT_ORIGIN GIT_SERVER_DIR WORK_DIR

Against a running django-oauth-toolkit provider (../dot/serve.sh, ISSUER) and git_server.py
(GIT_ORIGIN, its state directory GIT_SERVER_DIR: the bare repositories under root/, each
request logged to requests.jsonl, the tokens it refuses listed in refused),
with the vault binary linked as `git-credential-vault` and `docker-credential-vault` first on
PATH. git is Debian's (`git -c credential.helper=vault ...` runs the helper as any git would);
docker's side is `docker.credentials.Store('vault')` of the docker SDK, which runs the helper
exactly as the docker CLI does. Every token a helper hands out is checked with DOT itself (its
userinfo endpoint answers 200 and names the user for a live access token, 401 otherwise).
Exits non-zero if any case fails; prints one line per case with its time, then a summary.
"""

import fcntl
import hashlib
import json
import os
import pty
import secrets
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from urllib.parse import urlsplit

import docker
import docker.credentials
import requests
from docker.credentials.errors import CredentialsNotFound, StoreError

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "common"))
import interop  # noqa: E402  (../common/interop.py, standard library only)
DOT_DIR = os.path.join(os.path.dirname(HERE), "dot")
VAULT, ISSUER, GIT_ORIGIN, GIT_SERVER_DIR, WORK = sys.argv[1:6]
GIT_ROOT = os.path.join(GIT_SERVER_DIR, "root")
GIT_LOG = os.path.join(GIT_SERVER_DIR, "requests.jsonl")
GIT_REFUSED = os.path.join(GIT_SERVER_DIR, "refused")
ISSUER = ISSUER.rstrip("/")
USERINFO = ISSUER + "/userinfo/"
DEVICE_ENDPOINT = ISSUER + "/device-authorization/"
DEVICE_CLIENT = "cv-device"
DOT_PYTHON = os.path.join(os.environ["DOT_VENV"], "bin", "python")
GIT_HOST = urlsplit(GIT_ORIGIN).netloc  # 127.0.0.1:PORT, the git server's host entry
# The main vault: alice (user name alice) at GIT_HOST, REGISTRY and PREFIX; bob (user name bob)
# at GIT_HOST and PREFIX/team. Each account's hosts are given in one `set-host` call.
REGISTRY = "registry.example.test"      # docker's: alice's
PREFIX = "prefix.example.test"          # alice's; bob's at PREFIX/team
UNBOUND = "unbound.example.test"        # nobody's
# A second vault with its own sign-ins: alice (alice) then bob (no --username: oauth2).
DEFAULTS = "defaults.example.test"
# Bounds for a loaded 2-core CI machine; a passing run takes a fraction of each.
COMMAND_SECONDS = 120
HELPER_SECONDS = 20
PASSPHRASE = "cv-helpers-" + secrets.token_hex(12)


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def short(text, limit=400):
    text = str(text or "").strip()
    return text if len(text) <= limit else text[:limit] + "…"


# --- the user's environment: private HOME and XDG dirs, nothing of the machine's config ----------

os.makedirs(WORK, exist_ok=True)
BIN = os.path.join(WORK, "bin")
HOME = os.path.join(WORK, "home")
for directory in (BIN, HOME, os.path.join(WORK, "run"), os.path.join(WORK, "git")):
    os.makedirs(directory, mode=0o700, exist_ok=True)
for name in ("git-credential-vault", "docker-credential-vault"):
    os.symlink(VAULT, os.path.join(BIN, name))

ENV = {
    "PATH": BIN + ":/usr/bin:/bin",
    "HOME": HOME,
    "XDG_CONFIG_HOME": os.path.join(HOME, ".config"),
    "XDG_DATA_HOME": os.path.join(HOME, ".local", "share"),
    "XDG_STATE_HOME": os.path.join(HOME, ".local", "state"),
    "XDG_CACHE_HOME": os.path.join(HOME, ".cache"),
    # Where an agent's socket would be: private to this run, and none is started.
    "XDG_RUNTIME_DIR": os.path.join(WORK, "run"),
    "VAULT_PATH": os.path.join(WORK, "vault.db"),
    "LANG": "C.UTF-8",
    "NO_PROXY": "127.0.0.1,localhost,::1",
    "no_proxy": "127.0.0.1,localhost,::1",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_AUTHOR_NAME": "Interop", "GIT_AUTHOR_EMAIL": "interop@example.test",
    "GIT_COMMITTER_NAME": "Interop", "GIT_COMMITTER_EMAIL": "interop@example.test",
}
# The docker SDK finds the helper with shutil.which and runs it with a copy of os.environ (plus
# the Store's overrides, which cannot remove a variable): this process's environment is the
# user's shell, without VAULT_PASSPHRASE; a Store that should have the key is given it.
os.environ.clear()
os.environ.update(ENV)


def environment(passphrase=True, vault_path=None):
    env = dict(ENV)
    if vault_path:
        env["VAULT_PATH"] = vault_path
    if passphrase:
        env["VAULT_PASSPHRASE"] = PASSPHRASE
    return env


def vault(*arguments, stdin=None, passphrase=True, vault_path=None):
    return subprocess.run([VAULT, *arguments], input=stdin, capture_output=True, text=True,
                          env=environment(passphrase, vault_path), timeout=COMMAND_SECONDS)


def vault_ok(*arguments, **options):
    done = vault(*arguments, **options)
    check(done.returncode == 0, f"vault {' '.join(arguments)} exited {done.returncode}: {short(done.stderr)}")
    return done


def set_host(account, *hosts, username=None, default=False, vault_path=None):
    arguments = ["accounts", "set-host", state[account], *hosts]
    if username:
        arguments += ["--username", username]
    if default:
        arguments.append("--default")
    return vault(*arguments, vault_path=vault_path)


def set_host_ok(account, *hosts, **options):
    done = set_host(account, *hosts, **options)
    options.pop("vault_path", None)
    check(done.returncode == 0,
          f"set-host {account} {' '.join(hosts)} {options or ''} exited {done.returncode}: {short(done.stderr)}")


# --- git ----------------------------------------------------------------------------------------

def git(*arguments, cwd=None, stdin=None, passphrase=True, config=(), vault_path=None):
    command = ["git", "-c", "credential.helper=vault"]
    for item in config:
        command += ["-c", item]
    return subprocess.run([*command, *arguments], cwd=cwd, input=stdin, capture_output=True, text=True,
                          env=environment(passphrase, vault_path), timeout=COMMAND_SECONDS)


def credential(**fields):
    return "".join(f"{name}={value}\n" for name, value in fields.items() if value is not None) + "\n"


def parse_credential(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def fill(host, protocol="http", username=None, path=None, use_http_path=False, vault_path=None):
    """`git credential fill` through the helper: (the finished process, the fields git printed)."""
    config = ["credential.useHttpPath=true"] if use_http_path else []
    done = git("credential", "fill", stdin=credential(protocol=protocol, host=host, username=username, path=path),
               config=config, vault_path=vault_path)
    return done, parse_credential(done.stdout)


def fill_ok(host, **options):
    done, fields = fill(host, **options)
    check(done.returncode == 0 and fields.get("password"),
          f"git credential fill {host} {options or ''}: exit {done.returncode}: {short(done.stderr)}")
    return fields


def helper(program, operation, stdin, passphrase=True):
    """The helper run directly by the name git or docker gives it."""
    return subprocess.run([os.path.join(BIN, program), operation], input=stdin, capture_output=True, text=True,
                          env=environment(passphrase), timeout=HELPER_SECONDS)


def helper_with_terminal(program, operation, stdin, passphrase=False):
    """The helper with a pseudo-terminal as its controlling terminal (as from a user's shell) and
    stdin/stdout pipes, as git runs it. Returns (process, stdout, stderr, what it wrote to the
    terminal); a helper that waits for a passphrase on the terminal is killed after HELPER_SECONDS."""
    master, slave = pty.openpty()

    def controlling_terminal():
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    child = subprocess.Popen([os.path.join(BIN, program), operation], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(passphrase),
                             pass_fds=(slave,), preexec_fn=controlling_terminal)
    os.close(slave)
    terminal = bytearray()
    outputs = {}

    def communicate():
        outputs["out"], outputs["err"] = child.communicate(stdin.encode())
    talker = threading.Thread(target=communicate, daemon=True)
    talker.start()
    deadline = time.monotonic() + HELPER_SECONDS
    try:
        while talker.is_alive() and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    terminal += os.read(master, 4096)
                except OSError:
                    pass
        if talker.is_alive():
            child.kill()
            talker.join(5)
            raise Failure(f"{program} {operation} did not finish in {HELPER_SECONDS} s; "
                          f"on its terminal: {bytes(terminal).decode(errors='replace')!r}")
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            terminal += chunk
    finally:
        os.close(master)
    return child, outputs["out"].decode(errors="replace"), outputs["err"].decode(errors="replace"), \
        bytes(terminal).decode(errors="replace")


def server_log(since=0):
    try:
        with open(GIT_LOG) as log:
            return [json.loads(line) for line in log.read().splitlines()[since:]]
    except OSError:
        return []


def log_mark():
    return len(server_log())


def describe(entries):
    return "; ".join(f"{e['method']} {e['path'].split('?')[0]} {e['user']}→{e['status']} {e['outcome'][:60]}"
                     for e in entries[-8:])


# --- DOT ----------------------------------------------------------------------------------------

PROVIDER = requests.Session()
PROVIDER.trust_env = False  # loopback only: never a proxy from the environment


def userinfo(token):
    """The provider's own word on an access token: 200 and who it is, or 401."""
    response = PROVIDER.get(USERINFO, headers={"Authorization": "Bearer " + token}, timeout=30)
    return response.status_code, (response.json() if response.status_code == 200 else None)


def dot_user(token):
    status, claims = userinfo(token)
    return claims.get("preferred_username") if status == 200 else None


def fingerprint(token):
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def device_sign_in(user, vault_path=None):
    """`vault login --device` as a child; the user approves the code it shows in DOT's device page
    (../dot/browser.py, driven by ../common/interop.py). Returns the account's id."""
    out, _ = interop.device_sign_in(
        [VAULT, "login", "--issuer", ISSUER, "--client-id", DEVICE_CLIENT, "--device",
         "--device-authorization-endpoint", DEVICE_ENDPOINT, "--json"],
        environment(vault_path=vault_path), [DOT_PYTHON, os.path.join(DOT_DIR, "browser.py")], user,
        COMMAND_SECONDS, browser_env=dict(ENV, NO_PROXY="*"), failure=Failure, brief=short)
    return json.loads(out)["account"]["id"]


def store(passphrase=True):
    return docker.credentials.Store("vault", environment={"VAULT_PASSPHRASE": PASSPHRASE} if passphrase else None)


def raise_text(function):
    """What the SDK call raised: (exception class, its text), or (None, result)."""
    try:
        return None, function()
    except StoreError as error:
        return type(error), str(error)


# --- the cases ------------------------------------------------------------------------------------

CASES = interop.Cases()
case = CASES.case


state = {}


@case("sign-in: a vault (passphrase) and two accounts, alice and bob, through DOT's device flow")
def sign_in():
    vault_ok("init")
    for user in ("alice", "bob"):
        state[user] = device_sign_in(user)
        token = vault_ok("token", "--account", state[user]).stdout.strip()
        check(dot_user(token) == user, f"{user}'s token: DOT names {dot_user(token)!r}")


@case("set-host: alice and bob on one host entry as users alice and bob; the same user name twice is refused")
def bind_hosts():
    set_host_ok("alice", GIT_HOST, REGISTRY, PREFIX, username="alice")
    twice = set_host("bob", GIT_HOST, username="alice")
    check(twice.returncode != 0, f"a second account as user alice on {GIT_HOST} was accepted: {short(twice.stdout)}")
    set_host_ok("bob", GIT_HOST, PREFIX + "/team", username="bob")


@case("git: an unbound host needs no key: git's own 'terminal prompts disabled', nothing from the vault, no prompt")
def git_unbound():
    problems = []
    done = git("credential", "fill", stdin=credential(protocol="https", host=UNBOUND), passphrase=False)
    lines = done.stderr.strip().splitlines()
    if done.returncode == 0 or done.stdout.strip():
        problems.append(f"git credential fill: exit {done.returncode}: {short(done.stdout)}")
    if not (len(lines) == 1 and lines[0].startswith("fatal: could not read Username")
            and "terminal prompts disabled" in lines[0]):
        problems.append(f"git's stderr is not git's message alone: {short(done.stderr)!r}")
    try:
        child, out, err, terminal = helper_with_terminal("git-credential-vault", "get",
                                                         credential(protocol="https", host=UNBOUND))
        if not (child.returncode == 0 and out == "" and err == "" and terminal == ""):
            problems.append(f"git-credential-vault get (no VAULT_PASSPHRASE, a terminal): exit {child.returncode}, "
                            f"stdout {short(out)!r}, stderr {short(err)!r}, terminal {short(terminal)!r}")
    except Failure as error:
        problems.append(str(error))
    check(not problems, "\n        ".join(problems))


@case("git: a bound host answers username, the access token (DOT: alice's) and password_expiry_utc")
def git_bound():
    done = helper("git-credential-vault", "get", credential(protocol="http", host=GIT_HOST))
    fields = parse_credential(done.stdout)
    check(done.returncode == 0 and fields.get("password"),
          f"git-credential-vault get: exit {done.returncode}: {short(done.stdout)} {short(done.stderr)}")
    check(fields.get("username") == "alice", f"username {fields.get('username')!r}, not alice (the default)")
    check(dot_user(fields["password"]) == "alice", f"DOT names {dot_user(fields['password'])!r} for the password")
    expiry = fields.get("password_expiry_utc", "")
    check(expiry.isdigit() and time.time() + 60 <= int(expiry) <= time.time() + 86400,
          f"password_expiry_utc {expiry!r} is not a time a minute or more ahead")
    through_git = fill_ok(GIT_HOST)
    check(through_git.get("username") == "alice" and dot_user(through_git["password"]) == "alice",
          f"git credential fill: {through_git.get('username')!r}, DOT names {dot_user(through_git['password'])!r}")


@case("git: username=bob picks bob's binding (DOT: bob's token); username=carol, bound to nobody, gets nothing")
def git_username():
    bob = fill_ok(GIT_HOST, username="bob")
    check(bob.get("username") == "bob" and dot_user(bob["password"]) == "bob",
          f"username=bob: {bob.get('username')!r}, DOT names {dot_user(bob['password'])!r}")
    alice = fill_ok(GIT_HOST, username="alice")
    check(dot_user(alice["password"]) == "alice", f"username=alice: DOT names {dot_user(alice['password'])!r}")
    carol = helper("git-credential-vault", "get", credential(protocol="http", host=GIT_HOST, username="carol"))
    check(carol.returncode == 0 and carol.stdout.strip() == "",
          f"username=carol: exit {carol.returncode}, stdout {short(carol.stdout)!r}, stderr {short(carol.stderr)!r}")


@case("git (a second vault): no username: the first account bound answers, then the one set --default; oauth2 by default")
def git_default():
    other = os.path.join(WORK, "defaults.db")
    vault_ok("init", vault_path=other)
    for user in ("alice", "bob"):
        state["defaults-" + user] = device_sign_in(user, vault_path=other)
    set_host_ok("defaults-alice", DEFAULTS, username="alice", vault_path=other)
    set_host_ok("defaults-bob", DEFAULTS, vault_path=other)
    first = fill_ok(DEFAULTS, protocol="https", vault_path=other)
    check(first.get("username") == "alice" and dot_user(first["password"]) == "alice",
          f"first bound: {first.get('username')!r}, DOT names {dot_user(first['password'])!r}")
    oauth2 = fill_ok(DEFAULTS, protocol="https", username="oauth2", vault_path=other)
    check(dot_user(oauth2["password"]) == "bob", f"username=oauth2: DOT names {dot_user(oauth2['password'])!r}")
    set_host_ok("defaults-bob", DEFAULTS, default=True, vault_path=other)
    moved = fill_ok(DEFAULTS, protocol="https", vault_path=other)
    check(moved.get("username") == "oauth2" and dot_user(moved["password"]) == "bob",
          f"after --default bob: {moved.get('username')!r}, DOT names {dot_user(moved['password'])!r}")


@case("git: with credential.useHttpPath the longest path prefix wins (PREFIX/team: bob over PREFIX: alice)")
def git_prefix():
    team = fill_ok(PREFIX, protocol="https", path="team/repo.git", use_http_path=True)
    check(team.get("username") == "bob" and dot_user(team["password"]) == "bob",
          f"path team/repo.git: {team.get('username')!r}, DOT names {dot_user(team['password'])!r} (want bob)")
    other = fill_ok(PREFIX, protocol="https", path="other/repo.git", use_http_path=True)
    check(dot_user(other["password"]) == "alice", f"path other/repo.git: DOT names {dot_user(other['password'])!r}")
    no_path = fill_ok(PREFIX, protocol="https", path="team/repo.git")
    check(dot_user(no_path["password"]) == "alice",
          f"without useHttpPath (git drops the path): DOT names {dot_user(no_path['password'])!r}")


@case("git: store is ignored (exit 0); erase of the current token refreshes: the next get has a new one DOT accepts")
def git_store_erase():
    approved = git("credential", "approve", stdin=credential(protocol="http", host=GIT_HOST, username="alice",
                                                            password="not-a-vault-token"))
    check(approved.returncode == 0 and not approved.stderr.strip(),
          f"git credential approve: exit {approved.returncode}: {short(approved.stderr)}")
    direct = helper("git-credential-vault", "store",
                    credential(protocol="http", host=GIT_HOST, username="alice", password="not-a-vault-token"))
    check(direct.returncode == 0, f"git-credential-vault store: exit {direct.returncode}: {short(direct.stderr)}")
    before = fill_ok(GIT_HOST, username="alice")["password"]
    check(before != "not-a-vault-token" and dot_user(before) == "alice", "store was not ignored")
    rejected = git("credential", "reject", stdin=credential(protocol="http", host=GIT_HOST, username="alice",
                                                           password=before))
    check(rejected.returncode == 0 and not rejected.stderr.strip(),
          f"git credential reject: exit {rejected.returncode}: {short(rejected.stderr)}")
    after = fill_ok(GIT_HOST, username="alice")["password"]
    check(after != before, "the next get answered the erased token again")
    check(dot_user(after) == "alice", f"the new token: DOT names {dot_user(after)!r}")


@case("docker: get of a bound server: the SDK returns the binding's user name and a Secret DOT accepts")
def docker_get():
    kind, got = raise_text(lambda: store().get(REGISTRY))
    check(kind is None, f"Store.get({REGISTRY!r}) raised {kind and kind.__name__}: {short(got)}")
    check(got.get("Username") == "alice", f"Username {got.get('Username')!r}, not alice (the binding's)")
    check(dot_user(got.get("Secret", "")) == "alice", f"DOT names {dot_user(got.get('Secret', ''))!r} for the Secret")
    check(REGISTRY in got.get("ServerURL", ""), f"ServerURL {got.get('ServerURL')!r}")


@case("docker: get of an unbound server: CredentialsNotFound, without the key (no VAULT_PASSPHRASE)")
def docker_unbound():
    kind, text = raise_text(lambda: store(passphrase=False).get(UNBOUND))
    check(kind is CredentialsNotFound, f"Store.get({UNBOUND!r}): {kind and kind.__name__}: {short(str(text))}")
    raw = helper("docker-credential-vault", "get", UNBOUND, passphrase=False)
    check(raw.returncode == 1 and raw.stdout.strip() == "credentials not found in native keychain",
          f"docker-credential-vault get: exit {raw.returncode}, stdout {short(raw.stdout)!r}, stderr {short(raw.stderr)!r}")


@case("docker: another error is the vault's message on stdout: a bound server without passphrase or agent names it")
def docker_error():
    kind, text = raise_text(lambda: store(passphrase=False).get(REGISTRY))
    check(kind is StoreError, f"Store.get({REGISTRY!r}) without the key: {kind and kind.__name__}: {short(str(text))}")
    check('exited with "".' not in text and 'exited with "\n".' not in text,
          f"the SDK got no message from the helper: {text!r}")
    check("passphrase" in text.lower(), f"the message does not name the passphrase: {short(text)!r}")


@case('docker: list answers {"https://HOST": "USERNAME"} and never reads stdin (a pipe left open, 20 s)')
def docker_list():
    child = subprocess.Popen([os.path.join(BIN, "docker-credential-vault"), "list"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment())
    try:
        child.wait(timeout=HELPER_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        raise Failure(f"docker-credential-vault list did not answer in {HELPER_SECONDS} s with stdin open")
    finally:
        child.stdin.close()
    out, err = child.stdout.read().decode(), child.stderr.read().decode()
    check(child.returncode == 0, f"list: exit {child.returncode}: {short(out)} {short(err)}")
    listed = json.loads(out)
    check(listed.get("https://" + REGISTRY) == "alice", f"list: {short(out)}")
    check(listed.get("https://" + PREFIX + "/team") == "bob", f"list: {short(out)}")
    check(listed.get("https://" + GIT_HOST) in ("alice", "bob"), f"list has no https://{GIT_HOST}: {short(out)}")
    kind, through_sdk = raise_text(lambda: store().list())
    check(kind is None and through_sdk == listed, f"Store.list(): {kind and kind.__name__}: {short(str(through_sdk))}")


@case("docker: store of credentials the vault did not issue is refused, naming `vault login --host`; of get's, accepted")
def docker_store():
    kind, text = raise_text(lambda: store().store(REGISTRY, "alice", "not-a-vault-token"))
    check(kind is StoreError, f"Store.store(foreign secret): {kind and kind.__name__}: {short(str(text))}")
    check("vault login --host" in text, f"the refusal does not name `vault login --host`: {short(text)!r}")
    got = store().get(REGISTRY)
    kind, text = raise_text(lambda: store().store(got["ServerURL"], got["Username"], got["Secret"]))
    check(kind is None, f"Store.store(what get returned): {kind and kind.__name__}: {short(str(text))}")


@case("docker: erase of a bound server refreshes (next get: a new Secret DOT accepts); of an unbound one, not found")
def docker_erase():
    before = store().get(REGISTRY)["Secret"]
    kind, text = raise_text(lambda: store().erase(REGISTRY))
    check(kind is None, f"Store.erase({REGISTRY!r}): {kind and kind.__name__}: {short(str(text))}")
    after = store().get(REGISTRY)["Secret"]
    check(after != before, "the next get answered the erased Secret again")
    check(dot_user(after) == "alice", f"the new Secret: DOT names {dot_user(after)!r}")
    kind, text = raise_text(lambda: store().erase(UNBOUND))
    check(kind is CredentialsNotFound, f"Store.erase({UNBOUND!r}): {kind and kind.__name__}: {short(str(text))}")


def served_users(entries, marker):
    return {e["user"] for e in entries if e["status"] == 200 and marker in e["path"]}


@case("git clone http://127.0.0.1:PORT/repo.git: the default (alice) token; the server serves alice")
def git_clone_alice():
    bare = os.path.join(GIT_ROOT, "repo.git")
    seed = os.path.join(WORK, "git", "seed")
    for command in (["git", "init", "-q", "--bare", "-b", "main", bare], ["git", "init", "-q", "-b", "main", seed]):
        subprocess.run(command, check=True, capture_output=True, env=environment(False))
    with open(os.path.join(seed, "README"), "w") as readme:
        readme.write("seed\n")
    for command in (["git", "add", "README"], ["git", "commit", "-q", "-m", "seed"], ["git", "push", "-q", bare, "main"]):
        subprocess.run(command, cwd=seed, check=True, capture_output=True, env=environment(False))
    mark = log_mark()
    done = git("clone", f"{GIT_ORIGIN}/repo.git", os.path.join(WORK, "git", "alice"))
    entries = server_log(mark)
    check(done.returncode == 0, f"git clone: exit {done.returncode}: {short(done.stderr)} | server: {describe(entries)}")
    check(os.path.exists(os.path.join(WORK, "git", "alice", "README")), "the clone has no README")
    check(served_users(entries, "git-upload-pack") == {"alice"}, f"server: {describe(entries)}")


@case("git clone http://bob@127.0.0.1:PORT/repo.git: bob's token; the server serves bob")
def git_clone_bob():
    mark = log_mark()
    done = git("clone", GIT_ORIGIN.replace("://", "://bob@") + "/repo.git", os.path.join(WORK, "git", "bob"))
    entries = server_log(mark)
    check(done.returncode == 0, f"git clone: exit {done.returncode}: {short(done.stderr)} | server: {describe(entries)}")
    check(served_users(entries, "git-upload-pack") == {"bob"}, f"server: {describe(entries)}")
    check(all(e["dot_user"] == "bob" for e in entries if e["status"] == 200), f"server: {describe(entries)}")


@case("commit and git push as alice: the server runs receive-pack as alice; the bare repository has the commit")
def git_push():
    clone = os.path.join(WORK, "git", "alice")
    check(os.path.isdir(clone), "no clone of alice's (the clone case failed)")
    with open(os.path.join(clone, "alice.txt"), "w") as note:
        note.write("pushed by alice\n")
    for command in (["add", "alice.txt"], ["commit", "-q", "-m", "alice's change"]):
        done = git(*command, cwd=clone)
        check(done.returncode == 0, f"git {command[0]}: {short(done.stderr)}")
    mark = log_mark()
    done = git("push", "origin", "main", cwd=clone)
    entries = server_log(mark)
    check(done.returncode == 0, f"git push: exit {done.returncode}: {short(done.stderr)} | server: {describe(entries)}")
    check(served_users(entries, "git-receive-pack") == {"alice"}, f"server: {describe(entries)}")
    head = subprocess.run(["git", "--git-dir", os.path.join(GIT_ROOT, "repo.git"), "log", "-1", "--format=%s", "main"],
                          capture_output=True, text=True, env=environment(False))
    check(head.stdout.strip() == "alice's change", f"the bare repository's main: {head.stdout.strip()!r}")


@case("the server refuses the token: git fetch gets 401 and erases it (git 2.39 fails that fetch); the next fetch works")
def git_refused():
    clone = os.path.join(WORK, "git", "alice")
    check(os.path.isdir(clone), "no clone of alice's (the clone case failed)")
    current = fill_ok(GIT_HOST, username="alice")["password"]
    check(dot_user(current) == "alice", "DOT does not accept alice's current token")
    # As a server that no longer takes a token DOT would still refresh (git_server.py's
    # refused file). Revoking the access token at DOT is no substitute: DOT then refuses its
    # refresh token as an orphan, and the vault rightly says to sign in again.
    with open(GIT_REFUSED, "a") as refused:
        refused.write(fingerprint(current) + "\n")
    mark = log_mark()
    first = git("fetch", "origin", cwd=clone)
    first_entries = server_log(mark)
    # git 2.39 (http.c): a 401 to the helper's credentials makes it `erase` them and fail this
    # command ("Authentication failed"); it asks for credentials again only in the next command.
    check(first.returncode == 128 and "Authentication failed" in first.stderr,
          f"the first fetch: exit {first.returncode}: {short(first.stderr)} | server: {describe(first_entries)}")
    check(any(e["status"] == 401 and e["token"] == fingerprint(current) for e in first_entries),
          f"the server did not refuse the token: {describe(first_entries)}")
    mark = log_mark()
    second = git("fetch", "origin", cwd=clone)
    entries = server_log(mark)
    check(second.returncode == 0,
          f"the second fetch: exit {second.returncode}: {short(second.stderr)} | server: {describe(entries)}")
    served = [e for e in entries if e["status"] == 200]
    check(served and all(e["user"] == "alice" and e["dot_user"] == "alice" for e in served),
          f"server: {describe(entries)}")
    check(all(e["token"] != fingerprint(current) for e in served), "the second fetch presented the refused token")


def main():
    try:
        os.setsid()  # no controlling terminal: a helper that would prompt fails instead of waiting
    except OSError:
        pass  # already a session leader (run.sh starts it with setsid)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    failed = 0
    started = time.monotonic()
    for title, function in CASES:
        began = time.monotonic()
        try:
            function()
            print(f"  PASS  {time.monotonic() - began:5.1f} s  {title}", flush=True)
        except Exception as error:  # any error is this case's failure, not the suite's end
            failed += 1
            reason = f"{type(error).__name__}: {error}" if not isinstance(error, Failure) else str(error)
            print(f"  FAIL  {time.monotonic() - began:5.1f} s  {title}\n        {reason}", flush=True)
    total = time.monotonic() - started
    print(f"credential-helper interop: {len(CASES) - failed} of {len(CASES)} cases passed in {total:.0f} s",
          flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
