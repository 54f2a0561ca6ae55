"""multipart/form-data bodies, as the SDKs upload files (OpenAI's files, Fireworks' datasets)."""

from __future__ import annotations

import email.parser
import email.policy

from .core import ApiFailure


def multipart(
    content_type: str, body: bytes
) -> tuple[dict[str, str], dict[str, tuple[str, bytes]]]:
    """``(fields, files)`` of a form: ``files`` maps a field to (filename, bytes)."""
    if not content_type.startswith("multipart/form-data"):
        raise ApiFailure(400, "Expected multipart/form-data")
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, str] = {}
    files: dict[str, tuple[str, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or not name:
            continue
        decoded = part.get_payload(decode=True)
        payload = decoded if isinstance(decoded, bytes) else b""
        filename = part.get_filename()
        if filename is not None:
            files[name] = (filename, payload)
        else:
            fields[name] = payload.decode("utf-8")
    return fields, files
