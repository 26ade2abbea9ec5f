"""One part of a Django set or get of bench/shapes.py's values, called N times, for callgrind to count (issue 34):
the write before (cache._plain's walk + msgpack) and after (plain.pack_plain), what Django's backends pay
(pickle.dumps / pickle.loads), and the read before (msgpack.unpackb) and after (cache._unpack).

    for n in 5 15; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        .venv/bin/python clients/python/bench/codec_parts.py write_after $n "query 64 KiB" 2>&1 | grep Collected; done
    # instructions per call = (second - first) / 10
"""

import pickle
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import msgpack
from shapes import shapes

from larder.cache import _unpack
from larder.plain import pack_plain
from larder.serializers import pack_msgpack

v = shapes()[sys.argv[3]]


def _plain(value: Any, depth: int) -> bool:  # the walk before (cache.py at e917510)
    if value is None or type(value) in (bool, int, float, str, bytes):
        return True
    if depth >= 100:
        return False
    if type(value) is list:
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    return False


b = pack_msgpack(v)
pk = pickle.dumps(v, pickle.HIGHEST_PROTOCOL)
fs = {
    "write_before": lambda: _plain(v, 0) and pack_msgpack(v),
    "write_after": lambda: pack_plain(v),
    "pickle_dumps": lambda: pickle.dumps(v, pickle.HIGHEST_PROTOCOL),
    "read_before": lambda: msgpack.unpackb(b, raw=False, strict_map_key=False),
    "read_after": lambda: _unpack(b),
    "pickle_loads": lambda: pickle.loads(pk),
}
f = fs[sys.argv[1]]
for _ in range(int(sys.argv[2])):
    f()
