"""Whether a request comes from Slack: its v0 signature (HMAC-SHA256 of `v0:<timestamp>:<body>` with the signing
secret) over the raw bytes, and a timestamp within five minutes. Checked before the body is decoded or parsed, so
nothing an anonymous sender writes is read further or logged. (slack_sdk's verifier decodes the body as UTF-8
first, which raises on a body that is not: hence the few lines here.)
"""

from __future__ import annotations

import hashlib
import hmac
import time

MAX_AGE_SEC = 300                 # Slack's own window against replays
_MAX_TIMESTAMP_DIGITS = 12        # a Unix time in seconds


def signed_by_slack(body: bytes, timestamp: str | None, signature: str | None, secret: str,
                    now: float | None = None) -> bool:
    """True when `signature` is Slack's v0 signature of the raw `body` at `timestamp`, at most five minutes old."""
    if not secret.strip() or not timestamp or not signature:
        return False
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= _MAX_TIMESTAMP_DIGITS):
        return False  # " 12", "+12", "1_2" and "soon" are no Unix times
    if abs((time.time() if now is None else now) - int(timestamp)) > MAX_AGE_SEC:
        return False
    expected = "v0=" + hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()
    return signature.isascii() and hmac.compare_digest(expected, signature)
