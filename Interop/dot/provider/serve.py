#!/usr/bin/env python3
"""Run the DOT interop provider in the foreground.

    serve.py STATE_DIR PORT [--host 127.0.0.1]

Binds first (PORT 0 picks a free port), then migrates the SQLite DB in STATE_DIR,
provisions users and clients idempotently, and serves with Django's threaded
WSGI server (requests logged to stderr). Prints exactly one line
"ready http://HOST:PORT" on stdout (flushed) once the socket is listening;
the port is also written to STATE_DIR/port.

Users:   alice / $DOT_ALICE_PASSWORD (default alice-pass-1), email alice@example.test
         bob   / $DOT_BOB_PASSWORD   (default bob-pass-1),   email bob@example.test
Clients: cv-browser  public, authorization-code, consent page shown, RS256,
                     redirect URIs http://127.0.0.1/callback http://[::1]/callback
                     http://localhost/callback
         cv-device   public, urn:ietf:params:oauth:grant-type:device_code, RS256
         cv-service  confidential, client-credentials (RFC 6749 §4.4), secret
                     $DOT_SERVICE_SECRET (default cv-service-secret-1), stored hashed
                     as DOT does by default; client_secret_basic or client_secret_post
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# ../../common/interop.py: standard library only, nothing run on import.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "common"))
import interop  # noqa: E402

USERS = [
    ("alice", "DOT_ALICE_PASSWORD", "alice-pass-1", "alice@example.test"),
    ("bob", "DOT_BOB_PASSWORD", "bob-pass-1", "bob@example.test"),
]

BROWSER_REDIRECT_URIS = "http://127.0.0.1/callback http://[::1]/callback http://localhost/callback"
# The service account's secret: DOT keeps only a hash of it (hash_client_secret, DOT 2+), so the
# suite knows it from the same variable and default.
SERVICE_SECRET_ENV, SERVICE_SECRET_DEFAULT = "DOT_SERVICE_SECRET", "cv-service-secret-1"


def provision():
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model

    User = get_user_model()
    for name, env, default, email in USERS:
        user, _ = User.objects.get_or_create(username=name)
        user.email = email
        user.set_password(os.environ.get(env, default))
        user.save()

    Application = get_application_model()
    apps = [
        dict(
            client_id="cv-browser",
            name="CredentialVault browser login",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=BROWSER_REDIRECT_URIS,
            skip_authorization=False,
            algorithm=Application.RS256_ALGORITHM,
        ),
        dict(
            client_id="cv-device",
            name="CredentialVault device login",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_DEVICE_CODE,
            redirect_uris="",
            skip_authorization=False,
            algorithm=Application.RS256_ALGORITHM,
        ),
        dict(
            client_id="cv-service",
            name="CredentialVault service account",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
            redirect_uris="",
            skip_authorization=True,
            algorithm=Application.NO_ALGORITHM,
            # Hashed on save (PBKDF2, Django's password hasher): set again on every start.
            client_secret=os.environ.get(SERVICE_SECRET_ENV, SERVICE_SECRET_DEFAULT),
            hash_client_secret=True,
        ),
    ]
    for spec in apps:
        client_id = spec.pop("client_id")
        app = Application.objects.filter(client_id=client_id).first() or Application(client_id=client_id)
        spec.setdefault("client_secret", "")  # the public clients have none
        spec.setdefault("hash_client_secret", False)
        for k, v in spec.items():
            setattr(app, k, v)
        app.save()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("state_dir")
    ap.add_argument("port", type=int)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args()

    state_dir = os.path.abspath(args.state_dir)
    os.makedirs(state_dir, exist_ok=True)

    # Bind before Django settings load: the device verification URI needs the port.
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    ipv6 = ":" in args.host
    httpd = ThreadedWSGIServer((args.host, args.port), WSGIRequestHandler, ipv6=ipv6)
    port = httpd.server_address[1]
    host_in_url = f"[{args.host}]" if ipv6 else args.host
    base_url = f"http://{host_in_url}:{port}"

    os.environ["DOT_STATE_DIR"] = state_dir
    os.environ["DOT_BASE_URL"] = base_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dotprovider.settings")
    sys.path.insert(0, HERE)

    import django

    django.setup()
    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application

    call_command("migrate", verbosity=0, interactive=False)
    provision()

    httpd.set_app(get_wsgi_application())
    interop.serve_announced(httpd, base_url, port_file=os.path.join(state_dir, "port"),
                            note=f"dot: serving {base_url} (state {state_dir})")


if __name__ == "__main__":
    main()
