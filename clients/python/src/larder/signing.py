"""Signed ext values (spec/FORMAT.md §2, "Ext 80 and 101 are signed"): a pickle is unpickled only when this
application signed it.

Unpickling runs code the bytes name, and a shared store has many writers (other apps, other languages' clients, the
proxy's admin API). So a pickled value (MessagePack ext 80) is stored as

    scheme (1 byte, 1) ‖ HMAC-SHA256(signing_key, "larder-ext" ‖ 0x00 ‖ ext type ‖ payload) ‖ payload
    signing_key = HMAC-SHA256(the application's secret as UTF-8, "larder.signed-ext.v1")

and a reader unpickles only data whose mac one of its secrets (the current one, then fallbacks for rotation)
computes; anything else (too short, another scheme, another mac) is refused: the read is a miss, logged once per
process and reason on the `larder.signing` logger. Only the standard library's `hmac` and `hashlib`;
spec/vectors/signed.json pins every byte.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import threading
from collections.abc import Sequence
from typing import Final

#: The ext types whose data is signed: a pickle (Python) and a Marshal dump (Ruby).
PICKLE_EXT: Final = 80
MARSHAL_EXT: Final = 101
SCHEME: Final = 1
MAC_SIZE: Final = 32
KEY_MESSAGE: Final = b"larder.signed-ext.v1"
MAC_PREFIX: Final = b"larder-ext\x00"

Secret = str | bytes

logger = logging.getLogger("larder.signing")
_logged: set[str] = set()
_logged_lock = threading.Lock()


class Refused(ValueError):
    """Signed data that this reader does not accept; `reason` is one of `short`, `scheme`, `mac`, `no_secret`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def signing_key(secret: Secret) -> bytes:
    """HMAC-SHA256 keyed with the secret's UTF-8 bytes, over "larder.signed-ext.v1"."""
    raw = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
    return hmac.new(raw, KEY_MESSAGE, hashlib.sha256).digest()


def _mac(key: bytes, ext_type: int, payload: bytes) -> bytes:
    return hmac.new(key, MAC_PREFIX + bytes([ext_type]) + payload, hashlib.sha256).digest()


class Signer:
    """Signs with the current secret and verifies with it and its fallbacks (older secrets, for rotation)."""

    def __init__(self, secret: Secret, fallbacks: Sequence[Secret] = ()) -> None:
        if not isinstance(secret, (str, bytes)) or not secret:
            raise ValueError("a signing secret is a non-empty str (the application's secret)")
        if isinstance(fallbacks, (str, bytes)):
            raise TypeError("fallbacks is a sequence of secrets, not a single secret")
        self._key = signing_key(secret)
        self._keys = [self._key, *(signing_key(f) for f in fallbacks if f)]

    def sign(self, ext_type: int, payload: bytes) -> bytes:
        """The ext data for `payload`: scheme, mac, payload."""
        return bytes([SCHEME]) + _mac(self._key, ext_type, payload) + payload

    def verify(self, ext_type: int, data: bytes) -> bytes:
        """The payload of signed `data`, if one of the secrets signed it as `ext_type`; else raises `Refused`."""
        data = bytes(data)
        if len(data) < 1 + MAC_SIZE:
            raise Refused("short", f"ext {ext_type} data of {len(data)} bytes is shorter than a scheme and a mac")
        if data[0] != SCHEME:
            raise Refused("scheme", f"ext {ext_type} data has scheme {data[0]}, not {SCHEME} (unsigned, or unknown)")
        mac, payload = data[1 : 1 + MAC_SIZE], data[1 + MAC_SIZE :]
        for key in self._keys:
            if hmac.compare_digest(mac, _mac(key, ext_type, payload)):
                return payload
        raise Refused("mac", f"ext {ext_type} data is not signed by this application's secret")


def log_refusal(refused: Refused) -> None:
    """Logs the first refusal of each reason in this process (a warning); later ones are silent."""
    with _logged_lock:
        if refused.reason in _logged:
            return
        _logged.add(refused.reason)
    logger.warning(
        "larder: a pickled value was refused and read as a miss (%s); further refusals for this reason are not"
        " logged. Values are unpickled only when signed with this application's secret (spec/FORMAT.md §2).",
        refused,
    )


__all__ = ["MARSHAL_EXT", "PICKLE_EXT", "Refused", "Signer", "log_refusal", "signing_key"]
