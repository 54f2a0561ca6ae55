"""One TLS context for every SDK client a process makes.

Each SDK client builds its HTTP client, and each HTTP client loads the CA bundle
into a new TLS context: about 30 ms a client, paid again for every service a
command speaks to, every run of a group and every invocation in a long-lived
process. The context is the one the SDK would build (httpx2's default, which reads
``SSL_CERT_FILE`` / ``SSL_CERT_DIR``), so it is built once per bundle and shared;
verification is unchanged. boto3's clients share their service models the same way.
"""

from __future__ import annotations

import functools
import os
import ssl
from typing import Any


@functools.cache
def _context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """What the SDKs' HTTP clients build by default: httpx2's context where it is
    installed (the SDKs of late 2026: it reads SSL_CERT_FILE / SSL_CERT_DIR itself),
    else certifi's bundle or the variables' (as httpx's older clients)."""
    try:
        import httpx2
    except ImportError:
        pass
    else:
        made: ssl.SSLContext = httpx2.create_ssl_context()
        return made
    if cafile is None and capath is None:
        import certifi

        cafile = certifi.where()
    return ssl.create_default_context(cafile=cafile, capath=capath)


def context() -> ssl.SSLContext:
    """The process's verifying TLS context for the CA bundle the environment names."""
    return _context(os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)


def http_client(sdk: Any) -> Any:
    """A Stainless SDK's own default HTTP client (its timeouts, limits, redirects), on the
    shared TLS context."""
    return sdk.DefaultHttpxClient(verify=context())


@functools.cache
def boto_loader() -> Any:
    """botocore's loader of service models, shared: each boto3 client reads and parses
    its service's JSON models through it once per process."""
    import botocore.loaders

    return botocore.loaders.create_loader()
