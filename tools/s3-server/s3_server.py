"""The S3 test server of the integration tests: moto's S3 backend, plus SigV4 presigned-URL checks.

What and why: moto (5.2.5) does not verify a presigned URL at all; an expired one and a forged
signature both get 200. Real S3 refuses them: 403 AccessDenied "Request has expired", 403
SignatureDoesNotMatch. The middleware below checks every request whose query carries
X-Amz-Signature the way S3 does (SigV4 query-string authentication, access key and secret
"testing") and answers S3's error XML; everything else (unsigned requests) reaches moto unchanged.
Test setup only: run from the virtualenv of scripts/build-s3-server.sh, nothing of it ships.

Usage: s3_server.py [-H HOST] [-p PORT], as moto_server.
"""

import argparse
import datetime
import hashlib
import hmac
import os
import re
import signal
import sys
from urllib.parse import quote, unquote_to_bytes, urlsplit
from xml.sax.saxutils import escape

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import run_simple
from werkzeug.wsgi import get_input_stream

SECRETS = {"testing": "testing"}  # access key id -> secret access key
MAX_SKEW = datetime.timedelta(minutes=15)  # how far X-Amz-Date may lie in the future
MAX_EXPIRES = 7 * 24 * 3600
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
REQUIRED = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires",
            "X-Amz-SignedHeaders")


class S3Error(Exception):
    def __init__(self, status, code, message, **details):
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details

    def xml(self):
        fields = [("Code", self.code), ("Message", self.message)] + list(self.details.items())
        return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
                + "".join(f"<{k}>{escape(str(v))}</{k}>" for k, v in fields)
                + "</Error>").encode()


def query_error(message):
    return S3Error("400 Bad Request", "AuthorizationQueryParametersError", message)


def uri_encode(raw):
    """SigV4's encoding of a query name or value: all but A-Z a-z 0-9 - . _ ~ as %XX."""
    return quote(raw, safe="-_.~")


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def check_presigned(environ):
    """Raises S3Error unless the request's presigned URL is valid now, as S3 would check it."""
    # The request target as the client sent it (werkzeug's RAW_URI), not the decoded PATH_INFO:
    # S3 signs the path as sent, encoded once (botocore's S3 signer does not re-encode it).
    target = urlsplit(environ.get("RAW_URI") or environ.get("REQUEST_URI") or "")
    path = target.path or quote(environ.get("PATH_INFO", "/").encode("latin-1"), safe="/~")
    pairs = []
    for item in target.query.split("&"):
        if item:
            name, _, value = item.partition("=")
            pairs.append((unquote_to_bytes(name), unquote_to_bytes(value)))
    params = {n.decode("utf-8", "replace"): v.decode("utf-8", "replace") for n, v in pairs}

    if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
        raise query_error('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"')
    if any(p not in params for p in REQUIRED):
        raise query_error("Query-string authentication version 4 requires the X-Amz-Algorithm, "
                          "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, "
                          "and X-Amz-Expires parameters.")
    scope = params["X-Amz-Credential"].split("/")
    if len(scope) != 5 or scope[3] != "s3" or scope[4] != "aws4_request":
        raise query_error("Error parsing the X-Amz-Credential parameter; the Credential is "
                          "mal-formed; expecting "
                          "\"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
    access_key, day, region = scope[:3]
    if access_key not in SECRETS:
        raise S3Error("403 Forbidden", "InvalidAccessKeyId",
                      "The AWS Access Key Id you provided does not exist in our records.",
                      AWSAccessKeyId=access_key)
    amz_date = params["X-Amz-Date"]
    if not re.fullmatch(r"\d{8}T\d{6}Z", amz_date):
        raise query_error("X-Amz-Date must be in the ISO8601 Long Format "
                          "\"yyyyMMdd'T'HHmmss'Z'\"")
    if not re.fullmatch(r"\d+", params["X-Amz-Expires"]):
        raise query_error("X-Amz-Expires should be a number")
    expires = int(params["X-Amz-Expires"])
    if expires > MAX_EXPIRES:
        raise query_error("X-Amz-Expires must be less than a week (in seconds) that is 604800")
    if day != amz_date[:8]:
        raise query_error("Invalid credential date. Date is not the same as X-Amz-Date.")

    signed_at = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
        tzinfo=datetime.timezone.utc)
    now = datetime.datetime.now(datetime.timezone.utc)
    if now < signed_at - MAX_SKEW:
        raise S3Error("403 Forbidden", "AccessDenied", "Request is not valid yet")
    if now > signed_at + datetime.timedelta(seconds=expires):
        raise S3Error("403 Forbidden", "AccessDenied", "Request has expired",
                      **{"X-Amz-Expires": expires,
                         "Expires": iso(signed_at + datetime.timedelta(seconds=expires)),
                         "ServerTime": iso(now)})

    # The canonical request: method, path, sorted query without the signature, the signed
    # headers (values trimmed, inner spaces collapsed), their names, the payload hash.
    query = "&".join(sorted(f"{uri_encode(n)}={uri_encode(v)}" for n, v in pairs
                            if n != b"X-Amz-Signature"))
    signed = params["X-Amz-SignedHeaders"]
    headers = ""
    for name in signed.split(";"):
        key = {"content-type": "CONTENT_TYPE", "content-length": "CONTENT_LENGTH"}.get(
            name, "HTTP_" + name.upper().replace("-", "_"))
        headers += f"{name}:{' '.join(environ.get(key, '').split())}\n"
    payload = environ.get("HTTP_X_AMZ_CONTENT_SHA256") or UNSIGNED_PAYLOAD
    canonical = "\n".join([environ["REQUEST_METHOD"], path, query, headers, signed, payload])
    string_to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, "/".join(scope[1:]),
                                hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("AWS4" + SECRETS[access_key]).encode()
    for part in (day, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    provided = params.get("X-Amz-Signature", "")
    if not hmac.compare_digest(expected, provided):
        raise S3Error("403 Forbidden", "SignatureDoesNotMatch",
                      "The request signature we calculated does not match the signature you "
                      "provided. Check your key and signing method.",
                      AWSAccessKeyId=access_key, StringToSign=string_to_sign,
                      SignatureProvided=provided, CanonicalRequest=canonical)


class PresignedUrlCheck:
    """WSGI middleware: refuses a request with an invalid presigned URL, passes the rest on."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        if "X-Amz-Signature" not in environ.get("QUERY_STRING", ""):
            return self.app(environ, start_response)
        try:
            check_presigned(environ)
        except S3Error as e:
            # Read the body first: werkzeug closes the connection after the answer, and a client
            # still sending a large PUT could see the close as a reset instead of the answer.
            stream = get_input_stream(environ)
            while stream.read(1 << 16):
                pass
            body = e.xml()
            start_response(e.status, [("Content-Type", "application/xml"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        return self.app(environ, start_response)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=5000)
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))  # as moto_server does
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    moto_app = DomainDispatcherApplication(create_backend_app)  # what moto_server serves
    moto_app.debug = True
    run_simple(args.host, args.port, PresignedUrlCheck(moto_app), threaded=True,
               request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
