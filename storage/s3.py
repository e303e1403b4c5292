"""S3 for the warehouse: how to reach an endpoint (Iceberg's ``s3.*`` properties, the AWS environment) and the
single-request object operations icelog's commit path needs (PUT, conditional PUT, HEAD, GET), through botocore.

Layer: storage. May touch: an S3 endpoint (botocore, ``pyarrow.fs``). Knows nothing of Iceberg. ``pyarrow.fs``
alone would do everything, but it uploads every object as a multipart upload (three requests), answers "does it
exist" with a HEAD and a LIST, and cannot send ``If-None-Match``; with botocore (the ``s3`` extra) a small object
is one PUT, an existence check one HEAD, and a no-clobber write one conditional PUT. Errors name the location and
the S3 error code, never a credential.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import attrs
import pyarrow.fs as pafs

from storage.errors import FileAlreadyExists, FileError, FileNotFound

#: the URI schemes that name S3 objects; all three name the same bucket and key
S3_SCHEMES = ("s3", "s3a", "s3n")


@attrs.frozen(kw_only=True)
class S3Settings:
    """How to reach an S3 endpoint. Unset values fall back to the AWS SDK's own (environment variables, profile).

    :param endpoint: e.g. ``http://127.0.0.1:9000``; None for AWS itself
    :param region: the bucket region
    :param access_key_id: the access key
    :param secret_access_key: the secret key (never printed: ``repr`` hides it)
    :param session_token: a session token for temporary credentials
    :param path_style: address buckets by path (``endpoint/bucket/key``) instead of by host name
    """

    endpoint: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = attrs.field(default=None, repr=False)
    session_token: str | None = attrs.field(default=None, repr=False)
    path_style: bool | None = None

    @classmethod
    def from_properties(cls, properties: Mapping[str, str] | None = None,
                        environ: Mapping[str, str] | None = None) -> S3Settings:
        """Settings from Iceberg's FileIO property names (``s3.endpoint``, ``s3.region``, ``s3.access-key-id``,
        ``s3.secret-access-key``, ``s3.session-token``, ``s3.path-style-access``; ``client.region`` too), each
        falling back to the standard AWS environment variable (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``,
        ``AWS_REGION``, ``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
        ``AWS_SESSION_TOKEN``).

        :raises ValueError: ``s3.path-style-access`` that is not true or false (the message names the property)
        """
        props = dict(properties or {})
        env = os.environ if environ is None else environ

        def pick(names: tuple[str, ...], env_names: tuple[str, ...]) -> str | None:
            for name in names:
                if props.get(name):
                    return str(props[name])
            for name in env_names:
                if env.get(name):
                    return env[name]
            return None

        path_style_text = pick(("s3.path-style-access",), ())
        path_style: bool | None = None
        if path_style_text is not None:
            lowered = path_style_text.strip().lower()
            if lowered not in ("true", "false"):
                raise ValueError(f"s3.path-style-access must be true or false, not {path_style_text!r}")
            path_style = lowered == "true"
        return cls(endpoint=pick(("s3.endpoint",), ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")),
                   region=pick(("s3.region", "client.region"), ("AWS_REGION", "AWS_DEFAULT_REGION")),
                   access_key_id=pick(("s3.access-key-id",), ("AWS_ACCESS_KEY_ID",)),
                   secret_access_key=pick(("s3.secret-access-key",), ("AWS_SECRET_ACCESS_KEY",)),
                   session_token=pick(("s3.session-token",), ("AWS_SESSION_TOKEN",)),
                   path_style=path_style)

    def client_properties(self, *, credentials: bool = False) -> dict[str, str]:
        """The Iceberg FileIO properties a client needs to reach the same objects; the keys only with
        ``credentials``."""
        out: dict[str, str] = {}
        if self.endpoint:
            out["s3.endpoint"] = self.endpoint
        if self.region:
            out["s3.region"] = self.region
        if self.path_style is not None:
            out["s3.path-style-access"] = "true" if self.path_style else "false"
        if credentials:
            if self.access_key_id:
                out["s3.access-key-id"] = self.access_key_id
            if self.secret_access_key:
                out["s3.secret-access-key"] = self.secret_access_key
            if self.session_token:
                out["s3.session-token"] = self.session_token
        return out

    @property
    def configured(self) -> bool:
        """Whether S3 was asked for: an endpoint or keys given, or AWS keys in the environment. Without that, S3
        locations are refused instead of letting the SDK go looking for credentials on the network."""
        return bool(self.endpoint or self.access_key_id or os.environ.get("AWS_ACCESS_KEY_ID"))

    def filesystem(self) -> pafs.S3FileSystem:
        options: dict = {}
        if self.endpoint:
            parts = urlsplit(self.endpoint)
            options["endpoint_override"] = parts.netloc or parts.path
            options["scheme"] = parts.scheme or "https"
        if self.region:
            options["region"] = self.region
        if self.access_key_id or self.secret_access_key:
            options["access_key"] = self.access_key_id
            options["secret_key"] = self.secret_access_key
            if self.session_token:
                options["session_token"] = self.session_token
        if self.path_style is not None:
            options["force_virtual_addressing"] = not self.path_style
        return pafs.S3FileSystem(**options)


def is_s3(location: str | os.PathLike[str]) -> bool:
    """Whether a location names an S3 object (``s3://``, ``s3a://`` or ``s3n://``)."""
    return urlsplit(os.fspath(location)).scheme in S3_SCHEMES


#: S3 error codes of a conditional PUT whose key is taken
_TAKEN = ("PreconditionFailed", "ConditionalRequestConflict")
#: error codes of a server that does not do conditional PUTs
_NO_CONDITIONS = ("NotImplemented",)


class S3Client:
    """One botocore client per FileIO: thread-safe, with the SDK's standard retries (throttling, 5xx).

    Keys are ``bucket/key`` (``FileIO.resolve`` makes them); ``location`` is the caller's spelling, for errors.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._conditional = True

    @classmethod
    def create(cls, settings: S3Settings) -> S3Client | None:
        """A client for ``settings``; None without botocore or without explicit keys (settings or environment)."""
        key_id = settings.access_key_id or os.environ.get("AWS_ACCESS_KEY_ID")
        secret = settings.secret_access_key or os.environ.get("AWS_SECRET_ACCESS_KEY")
        if not key_id or not secret:
            return None
        try:
            import botocore.config
            import botocore.session
        except ImportError:
            return None
        style = "path" if settings.path_style else ("virtual" if settings.path_style is False else "auto")
        config = botocore.config.Config(s3={"addressing_style": style}, connect_timeout=10, read_timeout=60,
                                        retries={"max_attempts": 4, "mode": "standard"},
                                        request_checksum_calculation="when_required",
                                        response_checksum_validation="when_required")
        client = botocore.session.get_session().create_client(
            "s3", endpoint_url=settings.endpoint, region_name=settings.region or "us-east-1",
            aws_access_key_id=key_id, aws_secret_access_key=secret,
            aws_session_token=settings.session_token or os.environ.get("AWS_SESSION_TOKEN"), config=config)
        return cls(client)

    def put(self, path: str, data: bytes, *, location: str) -> None:
        bucket, key = _split(path)
        self._call("write", location, self._client.put_object, Bucket=bucket, Key=key, Body=data)

    def put_if_absent(self, path: str, data: bytes, *, location: str) -> bool:
        """PUT with ``If-None-Match: *``; False when the server does not do conditions (the caller falls back).

        :raises FileAlreadyExists: the key is taken
        """
        if not self._conditional:
            return False
        bucket, key = _split(path)
        try:
            self._call("write", location, self._client.put_object, answers=True, Bucket=bucket, Key=key,
                       Body=data, IfNoneMatch="*")
        except _Refused as e:
            if e.code in _TAKEN or e.status in (409, 412):
                raise FileAlreadyExists(f"Cannot write file: {location!r} already exists", path=location) from None
            if e.code in _NO_CONDITIONS or e.status == 501:
                self._conditional = False
                return False
            raise e.error from None
        return True

    def exists(self, path: str, *, location: str) -> bool:
        """Whether an object is at the key (one HEAD; a "folder" is not an object)."""
        bucket, key = _split(path)
        try:
            self._call("inspect", location, self._client.head_object, answers=True, Bucket=bucket, Key=key)
        except _Refused as e:
            if e.status == 404 and e.code != "NoSuchBucket":
                return False
            raise e.error from None
        return True

    def delete(self, path: str, *, location: str) -> None:
        """Delete the object at the key, and only it: pyarrow's delete also PUTs an empty marker for the parent
        "folder", an object outside what the caller deleted (outside a table's prefix, for a file appended in place).

        :raises FileNotFound: no object at the key
        """
        if not self.exists(path, location=location):
            raise FileNotFound(f"Cannot delete file: {location!r} does not exist", path=location)
        bucket, key = _split(path)
        self._call("delete", location, self._client.delete_object, Bucket=bucket, Key=key)

    def get(self, path: str, *, location: str) -> bytes:
        bucket, key = _split(path)
        answer = self._call("read", location, self._client.get_object, Bucket=bucket, Key=key)
        from botocore.exceptions import BotoCoreError

        try:
            return answer["Body"].read()
        except (BotoCoreError, OSError) as e:  # the connection dropped in the middle of the body
            raise FileError(f"Cannot read file: {location!r} (the S3 answer broke off: {type(e).__name__})",
                            path=location) from None

    def _call(self, action: str, location: str, method: Any, *, answers: bool = False, **kwargs: Any) -> Any:
        """Call a botocore method; an error answer raises its storage error, or (``answers``) :class:`_Refused`
        for the caller to look at."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return method(**kwargs)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            error = _error(action, location, code, status)
            if answers:
                raise _Refused(code, status, error) from None
            raise error from None
        except BotoCoreError as e:  # no answer: endpoint unreachable, timeouts
            raise FileError(f"Cannot {action} file: {location!r} (S3 endpoint not reachable: "
                            f"{type(e).__name__})", path=location) from None


class _Refused(Exception):
    """An S3 error answer, with the storage error it becomes unless the caller handles the code."""

    def __init__(self, code: str, status: int | None, error: FileError) -> None:
        super().__init__(code)
        self.code, self.status, self.error = code, status, error


def _error(action: str, location: str, code: str, status: int | None) -> FileError:
    if code == "NoSuchBucket":
        return FileError(f"Cannot {action} file: {location!r} (its bucket does not exist)", path=location)
    if code in ("NoSuchKey", "404") or (status == 404 and not code):
        return FileNotFound(f"Cannot {action} file: {location!r} does not exist", path=location)
    if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403") or status == 403:
        return FileError(f"Cannot {action} file: {location!r} (access denied: {code or status}; check the S3 "
                         f"credentials)", path=location)
    return FileError(f"Cannot {action} file: {location!r} (S3 answered {code or 'an error'}, HTTP {status})",
                     path=location)


def _split(path: str) -> tuple[str, str]:
    bucket, _, key = path.partition("/")
    return bucket, key
