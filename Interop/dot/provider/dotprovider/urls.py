from django.contrib.auth import views as auth_views
from django.http import HttpResponse
from django.urls import include, path
from oauth2_provider import views as oauth2_views


def signed_in(request):
    # Landing page after a login that had no ?next= (not part of any OAuth flow).
    return HttpResponse("<html><head><title>Logged in</title></head><body>Logged in.</body></html>")


urlpatterns = [
    # DOT: authorize, token, revoke_token, introspect, device-authorization, device,
    # device-confirm, OIDC discovery/jwks/userinfo, and (prefixed) RFC 8414 metadata
    # at /o/.well-known/oauth-authorization-server.
    path("o/", include("oauth2_provider.urls", namespace="oauth2_provider")),
    # RFC 8414 path-component form at the origin root, as DOT's docs recommend for
    # a prefixed mount: /.well-known/oauth-authorization-server/o -> issuer
    # http://host:port/o (same issuer as OIDC discovery). Only this exact path is
    # mounted (DOT's metadata_urlpatterns would also answer the bare root path with
    # a wrong issuer http://host:port).
    path(
        ".well-known/oauth-authorization-server/o",
        oauth2_views.OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata-root",
    ),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/done/", signed_in),
]
