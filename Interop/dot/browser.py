#!/usr/bin/env python3
"""Scripted browser for the django-oauth-toolkit interop provider.

    browser.py open URL [--user alice] [--password P] [--deny] [--expect TEXT]
    browser.py device VERIFICATION_URI [USER_CODE] [--user alice] [--password P] [--deny]

`open` does what `xdg-open URL` would: it follows redirects from URL (a loopback
URL of the CLI that 302s to the provider's authorize endpoint), logs in whenever
it lands on the login form (also again for prompt=login / max_age re-auth),
clicks Authorize (or Cancel with --deny) on the consent page, and follows the
provider's redirect to the CLI's loopback callback, waiting for its page.
Prints the final status and page title to stderr. Exit 0 iff the final page
contains --expect (default "Signed in"), else 1.

`device` logs in, enters USER_CODE on DOT's device page, and clicks Accept (or
Deny with --deny). Exit 0 iff DOT's status page then says "Authorized"
(or "Denied" with --deny).

Every request has a timeout (--timeout, default 60 s). --cookies FILE (or
$DOT_BROWSER_COOKIES) keeps the cookie jar between runs, like a real browser
profile (the provider session then survives, and a prompt=login request must
re-authenticate). Password default: $DOT_ALICE_PASSWORD / $DOT_BOB_PASSWORD or
the provider's fixed test passwords (alice-pass-1, bob-pass-1).
"""

import argparse
import html
import http.cookiejar
import os
import re
import sys
import time
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import requests

MAX_STEPS = 40
MAX_LOGINS = 4
DEFAULT_PASSWORDS = {"alice": "alice-pass-1", "bob": "bob-pass-1"}


def log(msg):
    print(f"browser: {msg}", file=sys.stderr, flush=True)


class Form:
    def __init__(self, attrs):
        self.attrs = dict(attrs)
        self.inputs = []  # (type, name, value)
        self.buttons = []  # (name, value, label)

    @property
    def id(self):
        return self.attrs.get("id", "")

    def names(self):
        return {n for _, n, _ in self.inputs if n} | {n for n, _, _ in self.buttons if n}

    def hidden(self):
        return {n: v for t, n, v in self.inputs if n and t == "hidden"}


class PageParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms = []
        self.title = ""
        self._in_title = False
        self._form = None
        self._button = None
        self.text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "title":
            self._in_title = True
        elif tag == "form":
            self._form = Form(attrs)
            self.forms.append(self._form)
        elif tag == "input" and self._form is not None:
            t = (a.get("type") or "text").lower()
            if t == "submit":
                self._form.buttons.append((a.get("name"), a.get("value", ""), a.get("value", "")))
            else:
                self._form.inputs.append((t, a.get("name"), a.get("value", "") or ""))
        elif tag == "button" and self._form is not None:
            self._button = [a.get("name"), a.get("value", ""), ""]

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        elif tag == "form":
            self._form = None
        elif tag == "button" and self._button is not None and self._form is not None:
            self._form.buttons.append(tuple(self._button))
            self._button = None

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        if self._button is not None:
            self._button[2] += data
        self.text.append(data)


def parse(body):
    p = PageParser()
    try:
        p.feed(body)
        p.close()
    except Exception as e:  # malformed HTML: keep whatever was parsed
        log(f"HTML parse problem: {e}")
    return p


def page_text(p):
    return re.sub(r"\s+", " ", " ".join(p.text)).strip()


class Browser:
    def __init__(self, args):
        self.args = args
        self.s = requests.Session()
        self.s.trust_env = False  # loopback only: never a proxy from the environment
        self.s.headers["User-Agent"] = "cv-interop-scripted-browser/1 (requests)"
        self.s.headers["Accept"] = "text/html,application/xhtml+xml,*/*;q=0.8"
        self.jar_path = args.cookies or os.environ.get("DOT_BROWSER_COOKIES") or None
        if self.jar_path:
            jar = http.cookiejar.LWPCookieJar(self.jar_path)
            if os.path.exists(self.jar_path):
                jar.load(ignore_discard=True, ignore_expires=False)
            self.s.cookies = jar
        self.deadline = time.monotonic() + args.total_timeout
        self.logins = 0

    def save(self):
        if self.jar_path:
            try:
                self.s.cookies.save(ignore_discard=True)
            except Exception as e:
                log(f"could not save cookies: {e}")

    def _timeout(self):
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("overall time limit exceeded")
        return min(self.args.timeout, left)

    def request(self, method, url, data=None, referer=None):
        headers = {}
        if method == "POST" and referer:
            sp = urlsplit(referer)
            headers["Origin"] = f"{sp.scheme}://{sp.netloc}"
            headers["Referer"] = referer
        t0 = time.monotonic()
        r = self.s.request(method, url, data=data, headers=headers, allow_redirects=False, timeout=self._timeout())
        log(f"{method} {url} -> {r.status_code} ({time.monotonic() - t0:.1f}s)")
        return r

    def run(self, method, url, data=None, referer=None, on_page=None):
        """Follow redirects and page handlers until a page that on_page does not act on."""
        for _ in range(MAX_STEPS):
            r = self.request(method, url, data=data, referer=referer)
            if r.is_redirect or r.status_code in (301, 302, 303, 307, 308):
                loc = r.headers.get("Location")
                if not loc:
                    return r, parse(r.text)
                nxt = urljoin(url, loc)
                log(f"  redirect -> {nxt}")
                if r.status_code in (307, 308):
                    referer, url = url, nxt
                    continue
                method, data, referer, url = "GET", None, url, nxt
                continue
            p = parse(r.text) if "html" in r.headers.get("Content-Type", "html") else PageParser()
            action = self.login_action(url, p) or (on_page(url, r, p) if on_page else None)
            if action is None:
                return r, p
            method, url, data = action
            referer = r.url
        raise RuntimeError("too many steps")

    def login_action(self, url, p):
        for f in p.forms:
            names = f.names()
            if "username" in names and "password" in names:
                self.logins += 1
                if self.logins > MAX_LOGINS:
                    raise RuntimeError("stuck on the login page (wrong password?)")
                fields = f.hidden()
                fields["username"] = self.args.user
                fields["password"] = self.args.password
                log(f"  login form: signing in as {self.args.user} (login #{self.logins})")
                return "POST", urljoin(url, f.attrs.get("action") or url), fields
        return None


def form_submit(url, form, extra):
    fields = {}
    for t, n, v in form.inputs:
        if n and t not in ("checkbox", "radio", "submit", "button"):
            fields[n] = v
    fields.update(extra)
    return "POST", urljoin(url, form.attrs.get("action") or url), fields


def visit(b, url, on_page):
    """Follows `url` through its pages; the last response and page, or None (logged) on failure.
    The cookie jar is saved either way."""
    try:
        return b.run("GET", url, on_page=on_page)
    except Exception as e:
        log(f"FAILED: {type(e).__name__}: {e}")
        return None
    finally:
        b.save()


def cmd_open(args):
    b = Browser(args)
    consent = {"done": 0}

    def on_page(url, r, p):
        for f in p.forms:
            if f.id == "authorizationForm" or "allow" in f.names():
                consent["done"] += 1
                if consent["done"] > 3:
                    raise RuntimeError("consent page keeps coming back")
                if args.deny:
                    log("  consent page: clicking Cancel (deny)")
                    return form_submit(url, f, {})
                allow = next((v for n, v, _ in f.buttons if n == "allow"), "Authorize")
                log("  consent page: clicking Authorize")
                return form_submit(url, f, {"allow": allow})
        return None

    visited = visit(b, args.url, on_page)
    if visited is None:
        return 2
    r, p = visited
    title = html.unescape(p.title.strip())
    text = page_text(p)
    log(f"final: {r.status_code} {r.url}")
    log(f"final title: {title!r}")
    ok = args.expect in title or args.expect in text
    if not ok:
        log(f"final page text: {text[:600]!r}")
    log("result: " + ("ok" if ok else f"page does not say {args.expect!r}"))
    return 0 if ok else 1


def cmd_device(args):
    b = Browser(args)
    steps = {"code": 0, "confirm": 0}

    def on_page(url, r, p):
        for f in p.forms:
            names = f.names()
            if "user_code" in names:
                steps["code"] += 1
                if steps["code"] > 2:
                    raise RuntimeError("user code rejected: " + page_text(p)[:300])
                code = args.user_code
                if not code:
                    code = next((v for _, n, v in f.inputs if n == "user_code"), "")
                log(f"  device page: entering user code {code}")
                return form_submit(url, f, {"user_code": code})
            if "action" in names:
                steps["confirm"] += 1
                if steps["confirm"] > 2:
                    raise RuntimeError("confirm page keeps coming back")
                action = "deny" if args.deny else "accept"
                log(f"  confirm page: clicking {action}")
                return form_submit(url, f, {"action": action})
        return None

    visited = visit(b, args.verification_uri, on_page)
    if visited is None:
        return 2
    r, p = visited
    text = page_text(p)
    log(f"final: {r.status_code} {r.url}")
    log(f"final title: {html.unescape(p.title.strip())!r} text: {text[:300]!r}")
    want = "Denied" if args.deny else "Authorized"
    ok = r.status_code == 200 and want in text
    log("result: " + ("ok" if ok else f"status page does not say {want!r}"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--user", default=os.environ.get("DOT_BROWSER_USER", "alice"))
    common.add_argument("--password", default=None)
    common.add_argument("--deny", action="store_true")
    common.add_argument("--timeout", type=float, default=60.0, help="per request, seconds")
    common.add_argument("--total-timeout", type=float, default=180.0, help="whole run, seconds")
    common.add_argument("--cookies", default=None, help="cookie jar file kept between runs")
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("open", parents=[common])
    o.add_argument("url")
    o.add_argument("--expect", default="Signed in")
    d = sub.add_parser("device", parents=[common])
    d.add_argument("verification_uri")
    d.add_argument("user_code", nargs="?", default="")
    args = ap.parse_args()
    if args.password is None:
        args.password = os.environ.get(f"DOT_{args.user.upper()}_PASSWORD", DEFAULT_PASSWORDS.get(args.user, ""))
    rc = cmd_open(args) if args.cmd == "open" else cmd_device(args)
    sys.exit(rc)


if __name__ == "__main__":
    main()
