"""Amazon Bedrock's face: batch inference jobs, ``InvokeModel`` and the S3 calls, on one port.

What boto3 sends when ``AWS_ENDPOINT_URL_BEDROCK``, ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``
and ``AWS_ENDPOINT_URL_S3`` all name the emulator: SigV4-signed calls whose
credential scope names the service (``…/us-east-1/bedrock/aws4_request``, ``…/s3/…``),
REST-JSON for Bedrock (errors as ``x-amzn-ErrorType`` and ``{"message"}``), path-style
REST-XML for S3. The signature is not checked (the emulator holds no secret), but a
call without one is refused as AWS refuses it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from ...core import HEX, ApiFailure, Store
from ...face import Exchange, FaultKind, Handle, Reply, Route, route
from . import s3
from .invoke import count_tokens, invoke
from .jobs import ACCOUNT, REGION, Jobs

PROFILE = re.compile(r"^(us|eu|apac|global|us-gov|jp|au)\.")
SCOPE = re.compile(r"Credential=[^/]+/\d{8}/[^/]+/([^/]+)/aws4_request")
_CONTROL = ("/model-invocation-job", "/model/", "/foundation-models/", "/inference-profiles/")


def _service(x: Exchange) -> str | None:
    found = SCOPE.search(x.header("Authorization"))
    return found.group(1) if found else None


class BedrockFace:
    name = "bedrock"

    def __init__(self, store: Store) -> None:
        self.store = store
        self.buckets = s3.Buckets()
        self.jobs = Jobs(store, self.buckets)
        self.s3 = s3.S3Routes(self.buckets, store.now)
        self.routes: Sequence[Route] = [
            route("POST", r"^/model-invocation-job$", self.create, creates=True),
            route("GET", r"^/model-invocation-jobs$", self.list),
            route("GET", r"^/model-invocation-job/(.+?)$", self.get),
            route("POST", r"^/model-invocation-job/(.+)/stop$", self.stop, writes=True),
            route("POST", r"^/model/(.+)/invoke$", self.invoke, writes=True),
            route("POST", r"^/model/(.+)/count-tokens$", self.count_tokens),
            route("GET", r"^/foundation-models$", self.foundation_models),
            route("GET", r"^/foundation-models/(.+)$", self.foundation_model),
            route("GET", r"^/inference-profiles/(.+)$", self.inference_profile),
            # S3's, answered only to a call signed for S3 (a Bedrock call no route above
            # takes is Bedrock's UnknownOperation, never S3's reading of its path)
            route("GET", r"^/$", self._s3(self.s3.list_buckets)),
            route("PUT", r"^/([^/]+)/?$", self._s3(self.s3.create_bucket), writes=True),
            route("HEAD", r"^/([^/]+)/?$", self._s3(self.s3.head_bucket)),
            route("GET", r"^/([^/]+)/?$", self._s3(self.s3.list)),
            route("POST", r"^/([^/]+)/?$", self._s3(self.s3.delete_objects), writes=True),
            route("PUT", r"^/([^/]+)/(.+)$", self._s3(self.s3.put), writes=True),
            route("POST", r"^/([^/]+)/(.+)$", self._s3(self.s3.post), writes=True),
            route("HEAD", r"^/([^/]+)/(.+)$", self._s3(self.s3.head)),
            route("GET", r"^/([^/]+)/(.+)$", self._s3(self.s3.get)),
            route("DELETE", r"^/([^/]+)/(.+)$", self._s3(self.s3.delete), writes=True),
        ]

    def _s3(self, handle: Handle) -> Handle:
        """An S3 route: answered only to a call signed for S3, on S3's bad days too."""
        only = _s3(handle)

        def day(x: Exchange, *groups: str) -> Reply:
            key = f"s3 {x.method} {x.path}"
            n = self.store.decide.nth(key)
            if self.store.anomaly("s3-slowdown", f"{key}#{n}"):
                raise ApiFailure(503, "Please reduce your request rate.", code="SlowDown")
            creates = x.method == "PUT" and x.header("If-None-Match").strip() == "*"
            if creates and self.store.anomaly("s3-conflict", f"{key}#{n}"):
                raise ApiFailure(
                    409,
                    "A conflicting conditional operation is currently in progress against"
                    " this resource. Please try again.",
                    code="ConditionalRequestConflict",
                )
            reply = only(x, *groups)
            if x.method == "PUT" and self.store.anomaly("s3-lost-reply", f"{key}#{n}"):
                raise ApiFailure(  # written; the caller cannot tell
                    500, "We encountered an internal error. Please try again.", code="InternalError"
                )
            return reply

        return day

    # the face ---------------------------------------------------------------
    def claims(self, x: Exchange) -> bool:
        mine = _service(x) in ("bedrock", "s3") or x.path.startswith(_CONTROL)
        if mine:  # which service the call is for: S3's errors are XML, Bedrock's JSON
            _CALL.s3 = _service(x) == "s3"
        return mine

    def authorise(self, x: Exchange, api_key: str | None) -> ApiFailure | None:
        """A signed call (any key, unless the emulator was given one: then that access key
        id only, as AWS refuses one it does not know)."""
        auth = x.header("Authorization")
        if not (auth.startswith("AWS4-HMAC-SHA256 ") or auth.startswith("Bearer ")):
            code = "AccessDenied" if _service(x) == "s3" else "MissingAuthenticationTokenException"
            return ApiFailure(403, "Missing Authentication Token", code=code)
        found = re.search(r"Credential=([^/,]+)/", auth)
        if api_key is not None and found and found.group(1) != api_key:
            if _service(x) == "s3":
                return ApiFailure(
                    403,
                    "The AWS Access Key Id you provided does not exist in our records.",
                    code="InvalidAccessKeyId",
                )
            return ApiFailure(
                403,
                "The security token included in the request is invalid.",
                code="UnrecognizedClientException",
            )
        return None

    def _request_id(self) -> str:
        t = self.store.decide.token(HEX, 32)
        return f"{t[:8]}-{t[8:12]}-{t[12:16]}-{t[16:20]}-{t[20:]}"

    def error(self, failure: ApiFailure) -> Reply:
        request_id = self._request_id()
        if getattr(_CALL, "s3", False) or failure.code in S3_CODES:
            return s3.error_reply(_as_s3(failure), request_id)
        code = failure.code or (
            "ThrottlingException"
            if failure.status == 429
            else "InternalServerException"
            if failure.status >= 500
            else "ValidationException"
        )
        headers = {"x-amzn-ErrorType": code, "x-amzn-RequestId": request_id, **failure.headers}
        return Reply({"message": failure.message}, failure.status, headers)

    def fault(self, kind: FaultKind) -> ApiFailure:
        if kind == "429":
            return ApiFailure(
                429,
                "Too many requests, please wait before trying again.",
                code="ThrottlingException",
            )
        if kind == "overloaded":
            return ApiFailure(503, "Service unavailable", code="ServiceUnavailableException")
        return ApiFailure(500, "Internal server error", code="InternalServerException")

    def advance(self, now: float, flush: bool) -> None:
        self.jobs.advance(now, flush)

    def ledger(self) -> list[dict[str, Any]]:
        return self.jobs.ledger()

    def tamper(self, batch_id: str, change: Mapping[str, Any]) -> None:
        """Misreport any field of a job (``{"submitTime": "yesterday"}``)."""
        self.jobs.get(batch_id).overrides.update(change)

    def restore(self, state: Mapping[str, Any]) -> None:
        """Nothing to take over: no snapshot of Bedrock jobs is made."""

    def base_url(self, url: str) -> str:
        return url

    def environment(self, url: str) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL_BEDROCK": url,
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": url,
            "AWS_ENDPOINT_URL_S3": url,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "demo-not-secret",
            "AWS_SECRET_ACCESS_KEY": "demo-not-secret",
            "AWS_EC2_METADATA_DISABLED": "true",
            "BEDROCK_ROLE_ARN": f"arn:aws:iam::{ACCOUNT}:role/batchbench-demo",
            "BATCHBENCH_S3_URI": f"s3://{s3.DEFAULT_BUCKET}/demo",
        }

    # the routes -------------------------------------------------------------
    def _reply(self, body: Any) -> Reply:
        return Reply(body, 200, {"x-amzn-RequestId": self._request_id()})

    def create(self, x: Exchange) -> Reply:
        return self._reply(self.jobs.create(x.json()))

    def get(self, x: Exchange, ident: str) -> Reply:
        return self._reply(self.jobs.get(ident).obj())

    def list(self, x: Exchange) -> Reply:
        max_results = x.int_param("maxResults", 1000, 1, 1000)
        return self._reply(self.jobs.listed(x.query, max_results))

    def stop(self, x: Exchange, ident: str) -> Reply:
        return self._reply(self.jobs.stop(ident))

    def foundation_models(self, x: Exchange) -> Reply:
        """ListFoundationModels (``byProvider``, ``byInferenceType`` filters): the Claude
        models the catalogue knows, as Bedrock names them."""
        provider = x.query.get("byProvider", "").lower()
        summaries = [
            self._model_details(model_id)
            for model_id in self.jobs.model_ids()
            if not provider or model_id.split(".", 1)[0] == provider
        ]
        return self._reply({"modelSummaries": summaries})

    def _model_details(self, model_id: str) -> dict[str, Any]:
        return {
            "modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{model_id}",
            "modelId": model_id,
            "modelName": model_id.split(".", 1)[-1],
            "providerName": model_id.split(".", 1)[0].capitalize(),
            "inputModalities": ["TEXT"],
            "outputModalities": ["TEXT"],
            "responseStreamingSupported": True,
            "inferenceTypesSupported": ["ON_DEMAND", "INFERENCE_PROFILE"],
            "modelLifecycle": {"status": "ACTIVE"},
        }

    def foundation_model(self, x: Exchange, model_id: str) -> Reply:
        model_id = unquote(model_id)
        if PROFILE.match(model_id) or not self.jobs.knows(model_id):
            raise ApiFailure(
                404, f"The model {model_id} does not exist", code="ResourceNotFoundException"
            )
        return self._reply({"modelDetails": self._model_details(model_id)})

    def inference_profile(self, x: Exchange, profile_id: str) -> Reply:
        profile_id = unquote(profile_id).rsplit("/", 1)[-1]
        if not PROFILE.match(profile_id) or not self.jobs.knows(profile_id):
            raise ApiFailure(
                404,
                f"The inference profile {profile_id} does not exist",
                code="ResourceNotFoundException",
            )
        model = PROFILE.sub("", profile_id)
        return self._reply(
            {
                "inferenceProfileName": profile_id,
                "inferenceProfileArn": f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/"
                + profile_id,
                "inferenceProfileId": profile_id,
                "models": [{"modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{model}"}],
                "status": "ACTIVE",
                "type": "SYSTEM_DEFINED",
            }
        )

    def count_tokens(self, x: Exchange, model_id: str) -> Reply:
        """CountTokens: what an InvokeModel of this body would count as input, free of
        charge (AWS: "no charge"), so nothing is executed or billed."""
        model_id = unquote(model_id)
        if not self.jobs.knows(model_id):
            raise ApiFailure(
                400, "The provided model identifier is invalid.", code="ValidationException"
            )
        status, body = count_tokens(x.json())
        if status != 200:
            raise ApiFailure(status, str(body.get("message")), code="ValidationException")
        return Reply(body, 200, {"x-amzn-RequestId": self._request_id()})

    def invoke(self, x: Exchange, model_id: str) -> Reply:
        model_id = unquote(model_id)
        if not self.jobs.knows(model_id):
            raise ApiFailure(
                400, "The provided model identifier is invalid.", code="ValidationException"
            )
        line = f"invoke/{self.store.decide.nth('bedrock-invoke')}"
        status, body = invoke(self.store, model_id, x.json(), line)
        self.store.executed(
            "bedrock-runtime", "on-demand", line, status, body if status == 200 else None
        )
        if status != 200:
            raise ApiFailure(status, str(body.get("message")))
        usage = body.get("usage") or {}
        return Reply(
            body,
            200,
            {
                "x-amzn-RequestId": self._request_id(),
                "x-amzn-bedrock-input-token-count": str(usage.get("input_tokens", 0)),
                "x-amzn-bedrock-output-token-count": str(usage.get("output_tokens", 0)),
            },
        )


S3_CODES = frozenset(
    {
        "NoSuchKey",
        "NoSuchBucket",
        "NoSuchUpload",
        "InvalidPart",
        "InvalidRange",
        "BucketAlreadyOwnedByYou",
        "NotImplemented",
        "AccessDenied",
        "InvalidAccessKeyId",
        "PreconditionFailed",
        "ConditionalRequestConflict",
        "SlowDown",
        "InternalError",
    }
)
# S3's codes for what a fault or another route raised in Bedrock's words.
_S3_BY_STATUS = {
    403: "AccessDenied",
    404: "NoSuchKey",
    429: "SlowDown",
    500: "InternalError",
    503: "SlowDown",
}
_CALL = threading.local()  # the call being answered on this thread: S3's or Bedrock's


def _as_s3(failure: ApiFailure) -> ApiFailure:
    """A failure said in S3's words (its XML codes: 503 SlowDown, 500 InternalError)."""
    if failure.code in S3_CODES:
        return failure
    code = _S3_BY_STATUS.get(failure.status, "InvalidRequest")
    status = 503 if code == "SlowDown" else failure.status
    return ApiFailure(status, failure.message, code=code, headers=failure.headers)


def _s3(handle: Handle) -> Handle:
    """An S3 route's handler, for a call signed for S3 only."""

    def only_s3(x: Exchange, *groups: str) -> Reply:
        if _service(x) != "s3":
            raise ApiFailure(
                404,
                f"The operation {x.method} {x.path} is not known to Amazon Bedrock",
                code="UnknownOperationException",
            )
        return handle(x, *groups)

    return only_s3


def make(store: Store) -> BedrockFace:
    return BedrockFace(store)
