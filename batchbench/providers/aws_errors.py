"""boto3's exceptions as batchbench's typed errors, each naming the call (AWS's map)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import botocore.exceptions
import botocore.parsers

from ..errors import ApiError, ConfigError, NoAnswer, Unreachable
from ..errors import TransientApiError as Transient
from .http_errors import one_line, status_error

KEY_HINT = "the AWS credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE…)"


@contextlib.contextmanager
def aws_errors(what: str, batch_id: str | None = None) -> Iterator[None]:
    """boto3's exceptions → typed errors naming the call (the exception map)."""
    try:
        yield
    except botocore.exceptions.ClientError as exc:
        error = exc.response.get("Error", {})
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 500)
        code = error.get("Code") or ""
        if code in ("ThrottlingException", "ServiceUnavailableException"):
            status = 429 if status < 500 and code == "ThrottlingException" else status
        message = f"{code}: {one_line(error.get('Message') or '')}".strip(": ")
        if status == 403:
            raise ApiError(
                f"{what}: AWS refused the credentials or role (HTTP 403: {message});"
                f" check {KEY_HINT} and their Bedrock and S3 permissions",
                status=403,
                batch_id=batch_id,
            ) from None
        raise status_error(what, status, message, key_hint=KEY_HINT, batch_id=batch_id) from None
    except (botocore.parsers.ResponseParserError, ValueError) as exc:
        # botocore reads a reply's timestamps and shapes as it parses it
        raise ApiError(
            f"{what}: AWS's reply does not read ({one_line(exc)})", batch_id=batch_id
        ) from None
    except botocore.exceptions.NoCredentialsError:
        raise ConfigError(f"{what}: no AWS credentials found: set {KEY_HINT}") from None
    except botocore.exceptions.PartialCredentialsError as exc:
        missing = exc.kwargs.get("cred_var") or "a part"
        raise ConfigError(
            f"{what}: AWS credentials are incomplete ({missing} is not set): set {KEY_HINT}"
        ) from None
    except botocore.exceptions.ProfileNotFound as exc:
        raise ConfigError(
            f"{what}: AWS_PROFILE names profile {exc.kwargs.get('profile')!r}, which AWS's"
            " config files do not have"
        ) from None
    except botocore.exceptions.EndpointConnectionError as exc:
        raise Unreachable(f"{what}: cannot connect ({one_line(exc)})", batch_id=batch_id) from None
    except (
        botocore.exceptions.ReadTimeoutError,
        botocore.exceptions.ConnectTimeoutError,
    ) as exc:
        raise NoAnswer(f"{what}: no answer in time ({one_line(exc)})", batch_id=batch_id) from None
    except (
        botocore.exceptions.ConnectionClosedError,
        botocore.exceptions.HTTPClientError,
        botocore.exceptions.IncompleteReadError,  # a body cut off: fetched again
    ) as exc:
        raise Transient(f"{what}: {one_line(exc)}", batch_id=batch_id) from None
