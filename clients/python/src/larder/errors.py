"""The one exception decoding raises.

Every way an entry can be invalid (spec/FORMAT.md §7) surfaces as `InvalidEntry`, whose `kind` is the error-kind
name shared by every larder implementation, so a caller (or a test comparing languages) can tell *why* without
parsing messages. Decoding never lets any other exception escape, whatever the input bytes.
"""

from __future__ import annotations

from typing import Final

TRUNCATED: Final = "truncated"
BAD_MAGIC: Final = "bad_magic"
UNSUPPORTED_VERSION: Final = "unsupported_version"
UNKNOWN_CODEC: Final = "unknown_codec"
BAD_HEADER: Final = "bad_header"
TOO_LARGE: Final = "too_large"
CORRUPT_PAYLOAD: Final = "corrupt_payload"
BAD_VALUE: Final = "bad_value"

#: The error kinds of spec/FORMAT.md §7, in the spec's order.
ERROR_KINDS: Final = (
    TRUNCATED,
    BAD_MAGIC,
    UNSUPPORTED_VERSION,
    UNKNOWN_CODEC,
    BAD_HEADER,
    TOO_LARGE,
    CORRUPT_PAYLOAD,
    BAD_VALUE,
)


class InvalidEntry(ValueError):
    """Bytes that are not a valid larder entry.

    `kind` is one of `ERROR_KINDS` (the names of spec/FORMAT.md §7); `detail` says what exactly was wrong.
    `str(error)` is `"<kind>: <detail>"`.
    """

    kind: str
    detail: str

    def __init__(self, kind: str, detail: str) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail

    def __reduce__(self) -> tuple[type[InvalidEntry], tuple[str, str]]:
        return (InvalidEntry, (self.kind, self.detail))
