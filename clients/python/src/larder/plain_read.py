"""A MessagePack array or map read by ormsgpack where it gives what msgpack gives, in half msgpack's time.

msgpack makes a new str for every map key it reads (a query result of 830 rows: 7.9 M instructions, twice
`pickle.loads` of the same rows), where ormsgpack keeps the keys it has made (4.1 M). Its answer is taken only where
it is msgpack's (`msgpack.unpackb(payload, raw=False, strict_map_key=False)`); anything else is left to msgpack:
- maps with str keys only, no ext types: ormsgpack refuses the rest, and the caller reads those with msgpack;
- exactly one value in the payload: ormsgpack ignores bytes after the value, so it reads `[payload, mark]`, where
  the mark is an ext holding 16 random bytes of this process, found nowhere in the payload, and the value is taken
  only if the array's second item is that mark (a payload with bytes after its value, or cut short, puts something
  else there or fails);
- nesting: ormsgpack's limit (1,022 levels inside the array) is below msgpack's (1,024), so it fails first.
Scalars are left to msgpack, which reads them faster than the array and its mark can be made.
"""

from __future__ import annotations

import os
from typing import Any, Final

import ormsgpack

#: What `unpack_container` returns for a payload it leaves to msgpack.
NOT_READ: Final = object()

_MARK_TYPE: Final = 127
_SECRET: Final = os.urandom(16)
_HEAD: Final = b"\x92"  # an array of two: the payload's value, then the mark
_MARK: Final = b"\xd8" + _MARK_TYPE.to_bytes(1, "big") + _SECRET  # fixext 16
_END: Final = object()
_unpackb: Final = ormsgpack.unpackb
#: The first bytes of a MessagePack map or array: fixmap, fixarray, array 16/32, map 16/32.
_CONTAINER_HEADS: Final = frozenset([*range(0x80, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])


def _ext(code: int, data: bytes) -> Any:
    if code == _MARK_TYPE and data == _SECRET:
        return _END
    raise ValueError("an ext type: read by msgpack")


def unpack_container(payload: bytes | memoryview) -> Any:
    """The array or map that is the whole of `payload`, as msgpack would read it, or `NOT_READ` for anything else
    (a scalar, a map with other keys than str, an ext type, an invalid payload): msgpack's to read or refuse."""
    if not payload or payload[0] not in _CONTAINER_HEADS:
        return NOT_READ
    framed = b"".join((_HEAD, payload, _MARK))
    if framed.find(_SECRET) != len(framed) - len(_SECRET):
        return NOT_READ  # the mark's bytes in the payload itself (a scan at C speed): not to be mistaken for it
    try:
        read = _unpackb(framed, ext_hook=_ext)
    except Exception:
        return NOT_READ
    if type(read) is list and len(read) == 2 and read[1] is _END:
        return read[0]
    return NOT_READ
