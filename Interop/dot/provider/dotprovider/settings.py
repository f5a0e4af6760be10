"""Django settings for the django-oauth-toolkit (DOT) interop provider.

A deliberately demanding OAuth 2.0 / OpenID Connect provider for loopback tests:
PKCE required, refresh-token rotation with reuse protection, short access tokens,
consent page always shown, RS256 ID tokens, RFC 8628 device grant.

Environment:
  DOT_STATE_DIR   (required) directory for db.sqlite3, oidc-rsa.pem, secret-key
  DOT_BASE_URL    public base URL, e.g. http://127.0.0.1:8123 (serve.py sets it);
                  used for the device verification_uri(_complete)
  DOT_ALLOW_LOCALHOST_LOOPBACK=1  also treat http://localhost redirect URIs as
                  port-agnostic loopback URIs (DOT default: only 127.0.0.1 / ::1)
  DOT_ACCESS_TOKEN_SECONDS  access-token lifetime (default 300)
"""

import os
import secrets
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

STATE_DIR = Path(os.environ.get("DOT_STATE_DIR", "")).resolve() if os.environ.get("DOT_STATE_DIR") else None
if STATE_DIR is None:
    raise RuntimeError("DOT_STATE_DIR must be set")
STATE_DIR.mkdir(parents=True, exist_ok=True)

BASE_URL = os.environ.get("DOT_BASE_URL", "http://127.0.0.1:8000").rstrip("/")


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _secret_key() -> str:
    path = STATE_DIR / "secret-key"
    if not path.exists():
        _write_atomically(path, secrets.token_urlsafe(50).encode())
    return path.read_text().strip()


def _rsa_private_key() -> str:
    """RS256 signing key for ID tokens; generated on first use into the state dir."""
    path = STATE_DIR / "oidc-rsa.pem"
    if not path.exists():
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _write_atomically(path, pem)
    return path.read_text()


SECRET_KEY = _secret_key()
DEBUG = os.environ.get("DOT_DEBUG") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "oauth2_provider",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "dotprovider.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": STATE_DIR / "db.sqlite3",
        # The server is threaded (browser and device poll overlap): wait for locks.
        "OPTIONS": {"timeout": 30},
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/accounts/done/"

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_RSA_PRIVATE_KEY": _rsa_private_key(),
    "OAUTH2_VALIDATOR_CLASS": "dotprovider.validators.ClaimsValidator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "profile": "Your profile (username)",
        "email": "Your e-mail address",
        "read": "Read access",
        "write": "Write access",
        "offline_access": "Offline access",
    },
    "DEFAULT_SCOPES": ["read"],
    "PKCE_REQUIRED": True,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ.get("DOT_ACCESS_TOKEN_SECONDS", "300")),
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "ALLOW_LOCALHOST_LOOPBACK": os.environ.get("DOT_ALLOW_LOCALHOST_LOOPBACK") == "1",
    # RFC 8628 device authorization grant.
    "DEVICE_FLOW_INTERVAL": 1,
    "OAUTH_DEVICE_VERIFICATION_URI": f"{BASE_URL}/o/device/",
    "OAUTH_DEVICE_VERIFICATION_URI_COMPLETE": f"{BASE_URL}/o/device/?user_code={{user_code}}",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "dot: %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "django.request": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
        "oauth2_provider": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
    },
}
