"""Self-signed JWTs, which Google accepts as bearer tokens in place of an access token.

google-auth's service-account credentials sign one themselves when the client asks for
it (``always_use_jwt_access``: google-cloud-aiplatform's generated clients do, and
Curator's Gemini backend on top of them), and send no token request at all. Google's
rule (AIP-4111, https://google.aip.dev/auth/4111): RS256, signed by the service
account's key (``kid`` its ``private_key_id``); ``iss`` and ``sub`` the account's
email; either ``aud`` the service's URL (``https://aiplatform.googleapis.com/``, a
regional one, or the endpoint the client was pointed at) or a ``scope`` claim naming
an OAuth scope the API takes; ``iat`` and ``exp`` an hour apart at most, ``exp`` not
passed. Anything else is refused as an invalid credential, as Google refuses it.

The times are the wall clock's, as the client's are (google-auth stamps ``iat`` from
its own clock): not the emulator's clock, which a test may have moved.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

# The scopes Vertex AI's API takes (its discovery document's auth section).
SCOPES = frozenset(
    {
        "https://www.googleapis.com/auth/cloud-platform",
        "https://www.googleapis.com/auth/cloud-platform.read-only",
    }
)
GOOGLE_HOST = re.compile(r"^(?:[a-z0-9-]+-)?aiplatform\.googleapis\.com$")
LONGEST = 3600.0  # seconds a self-signed JWT may live
SKEW = 300.0  # seconds of clock difference tolerated, as Google's token checks allow


def _part(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def looks_like(token: str) -> bool:
    """A JWT's shape: three base64url parts (an access token has none)."""
    return token.count(".") == 2


def verified(token: str, accounts: Mapping[str, tuple[str, Any]], host: str) -> str | None:
    """The service account (its email) Google would take ``token`` from as a self-signed
    JWT, or None. ``accounts``: each known account's key id and RSA public key (a
    ``cryptography`` key; Google publishes every account's); ``host``: the Host the
    client called."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    try:
        head, body, signature = token.split(".")
        header, claims = json.loads(_part(head)), json.loads(_part(body))
        signed = _part(signature)
    except (ValueError, binascii.Error):
        return None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        return None
    email = claims.get("iss")
    if not isinstance(email, str) or email not in accounts or claims.get("sub", email) != email:
        return None
    key_id, public = accounts[email]
    if header.get("alg") != "RS256" or header.get("kid") not in (None, key_id):
        return None
    try:
        public.verify(signed, f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
    except InvalidSignature:
        return None
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, (int, float)) or not isinstance(exp, (int, float)):
        return None
    now = time.time()
    if exp <= now - SKEW or iat > now + SKEW or exp - iat > LONGEST:
        return None
    return email if _for_this_api(claims, host) else None


def _for_this_api(claims: dict[str, Any], host: str) -> bool:
    """``aud`` this service (Google's host, or the one the client called), or a scope
    the API takes."""
    scope = claims.get("scope")
    if isinstance(scope, str) and SCOPES & set(scope.split()):
        return True
    audience = claims.get("aud")
    if not isinstance(audience, str):
        return False
    named = urlsplit(audience).netloc or audience.rstrip("/")
    return bool(GOOGLE_HOST.match(named)) or (bool(host) and named == host)
