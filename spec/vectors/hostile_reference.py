"""Writes the attack vectors every language runs (spec/vectors/README.md, "hostile_*.json"; issue 32).

Each case's expected outcome is written by hand beside it, from spec/STORES.md §2 and §7 and spec/HTTP.md §2; for
keys, the script also derives the outcome from the safe-key rule on the key's bytes and writes the file only when the
two agree. Only the standard library:

    python3 spec/vectors/hostile_reference.py           # write the four files
    python3 spec/vectors/hostile_reference.py --check   # exit 1 unless the files are current
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

#: An uncompressed msgpack value entry that never expires (entries.json `threshold_zero_tiny`: the integer 1).
ENTRY_HEX = "c14c01000100000068e5cf8b010000000000000000000001"
SENTINEL = {"key": "larder-sentinel", "value": "S"}


# --- hostile_keys.json -------------------------------------------------------------------------------------------


def safe_key_rule(raw: bytes) -> str:
    """STORES.md §2 on the key's bytes: `stored` or `refused` (the second derivation of every outcome)."""
    try:
        raw.decode("utf-8", "strict")
    except UnicodeDecodeError:
        return "refused"
    if not raw or len(raw) > 250 or any(b <= 0x20 or b == 0x7F for b in raw):
        return "refused"
    return "stored"


def text(name: str, cls: str, key: str, outcome: str, note: str = "") -> dict[str, Any]:
    """A key with a UTF-16 form (possibly with unpaired surrogates, which Python's str carries)."""
    raw = key.encode("utf-8", "surrogatepass")
    units = key.encode("utf-16-le", "surrogatepass")
    case: dict[str, Any] = {
        "name": name,
        "class": cls,
        "key_hex": raw.hex(),
        "key_utf16": [int.from_bytes(units[i : i + 2], "little") for i in range(0, len(units), 2)],
        "outcome": outcome,
    }
    return finish(case, raw, note)


def octets(name: str, cls: str, raw: bytes, outcome: str, note: str = "") -> dict[str, Any]:
    """A key that is bytes only: not UTF-8, so no UTF-16 form."""
    return finish({"name": name, "class": cls, "key_hex": raw.hex(), "outcome": outcome}, raw, note)


def finish(case: dict[str, Any], raw: bytes, note: str) -> dict[str, Any]:
    derived = safe_key_rule(raw)
    if derived != case["outcome"]:
        sys.exit(f"{case['name']}: written {case['outcome']}, the rule says {derived}")
    if case["outcome"] == "stored":
        case["wire_hex"] = raw.hex()
    if note:
        case["note"] = note
    return case


SMUGGLE_SET = "x\u010d\u010ams\u0120larder-sentinel\u01201\u0120T0\u010d\u010aX\u010d\u010a"
SMUGGLE_FLUSH = "x\u010d\u010aflush_all\u010d\u010a"
SMUGGLE_DELETE = "x\u010d\u010amd\u0120larder-sentinel\u010d\u010a"
SMUGGLE_RESP = "\u00e9" * 20 + "\r\n*1\r\n$8\r\nFLUSHALL\r\n"


def key_cases() -> list[dict[str, Any]]:
    return [
        text("ascii_plain", "control", "user:42", "stored", "an ordinary key, so a runner that refuses all is seen"),
        text("ascii_url", "control", "GET:http://shop.example/p?a=1", "stored"),
        text("empty", "empty", "", "refused", "memcached cannot hold it; it is a valid purge prefix"),
        text("cr", "ascii_control", "a\rb", "refused"),
        text("lf", "ascii_control", "a\nb", "refused"),
        text("crlf_command", "ascii_control", "k\r\nflush_all", "refused", "a second memcached command"),
        text("nul", "ascii_control", "a\x00b", "refused"),
        text("space", "ascii_control", "a b", "refused", "a space splits a memcached argument"),
        text("tab", "ascii_control", "a\tb", "refused"),
        text("control_01", "ascii_control", "a\x01b", "refused"),
        text("control_1f", "ascii_control", "a\x1fb", "refused"),
        text("del", "ascii_control", "a\x7fb", "refused"),
        text("c1_0080", "c1_control", "a\u0080b", "stored", "C2 80: no byte is a control"),
        text("c1_0085_nel", "c1_control", "a\u0085b", "stored", "NEL, C2 85; the latin1 byte 0x85 would not be UTF-8"),
        text("c1_009f", "c1_control", "a\u009fb", "stored"),
        text("latin1_e9", "latin1", "caf\u00e9", "stored", "C3 A9; a latin1 encoder writes E9"),
        text("latin1_ff", "latin1", "\u00ff", "stored"),
        text("u0100_low_nul", "u01xx", "a\u0100b", "stored", "C4 80; latin1 truncation gives NUL"),
        text("u0109_low_tab", "u01xx", "a\u0109b", "stored", "C4 89; latin1 truncation gives TAB"),
        text("u010a_low_lf", "u01xx", "a\u010ab", "stored", "C4 8A; latin1 truncation gives LF"),
        text("u010d_low_cr", "u01xx", "a\u010db", "stored", "C4 8D; latin1 truncation gives CR"),
        text("u0120_low_space", "u01xx", "a\u0120b", "stored", "C4 A0; latin1 truncation gives a space"),
        text("u012f_low_slash", "u01xx", "a\u012fb", "stored", "C4 AF; latin1 truncation gives /"),
        text("u017f_low_del", "u01xx", "a\u017fb", "stored", "C5 BF; latin1 truncation gives DEL"),
        text(
            "smuggle_ms_sentinel",
            "smuggle",
            SMUGGLE_SET,
            "stored",
            "under latin1: x CR LF `ms larder-sentinel 1 T0` CR LF X CR LF, overwriting the sentinel (issue 32 #1)",
        ),
        text("smuggle_flush_all", "smuggle", SMUGGLE_FLUSH, "stored", "under latin1: CR LF flush_all CR LF"),
        text("smuggle_md_sentinel", "smuggle", SMUGGLE_DELETE, "stored", "under latin1: deletes the sentinel"),
        text(
            "smuggle_resp_length",
            "smuggle",
            SMUGGLE_RESP.replace("\r\n", "\u010d\u010a"),
            "stored",
            "20 two-byte characters: a RESP length counted in characters, not bytes, leaves 20 bytes of the key to "
            "be read as the next command",
        ),
        text("u2028_line_separator", "bmp", "a\u2028b", "stored", "E2 80 A8"),
        text("u3000_ideographic_space", "bmp", "a\u3000b", "stored", "E3 80 80: a space to Unicode, not to the rule"),
        text("ufeff_bom", "bmp", "\ufeffk", "stored"),
        text("ufffd_replacement", "bmp", "a\ufffdb", "stored", "the character itself is valid"),
        text("uffff_noncharacter", "bmp", "a\uffffb", "stored", "EF BF BF"),
        text("cjk", "bmp", "\u65e5\u672c\u8a9e", "stored"),
        text("astral_pair", "astral", "a\U0001f600b", "stored", "a valid surrogate pair: F0 9F 98 80"),
        text("lone_high_surrogate", "surrogate", "a\ud800b", "refused", "not Unicode; never U+FFFD"),
        text("lone_low_surrogate", "surrogate", "a\udc00b", "refused"),
        text("reversed_pair", "surrogate", "\udc00\ud800", "refused"),
        text("high_at_end", "surrogate", "k\udbff", "refused"),
        octets("bytes_latin1_e9", "not_utf8", b"caf\xe9", "refused", "a latin1 byte string"),
        octets("bytes_ff", "not_utf8", b"k\xff", "refused"),
        octets("bytes_overlong_slash", "not_utf8", b"a\xc0\xafb", "refused", "an overlong /"),
        octets("bytes_truncated", "not_utf8", b"k\xc3", "refused"),
        octets("bytes_past_10ffff", "not_utf8", b"\xf4\x90\x80\x80", "refused"),
        octets("bytes_c1_raw_85", "not_utf8", b"a\x85b", "refused", "the latin1 NEL byte alone"),
        text("ascii_250", "length", "k" * 250, "stored"),
        text("ascii_251", "length", "k" * 251, "refused"),
        text("e9_x125_250_bytes", "length", "\u00e9" * 125, "stored", "125 characters, 250 bytes"),
        text("e9_x126_252_bytes", "length", "\u00e9" * 126, "refused", "126 characters, 252 bytes: count bytes"),
        text("a_e9_x124_b_250_bytes", "length", "a" + "\u00e9" * 124 + "b", "stored"),
        text("aa_e9_x124_b_251_bytes", "length", "aa" + "\u00e9" * 124 + "b", "refused", "127 characters"),
        text("euro_x83_249_bytes", "length", "\u20ac" * 83, "stored"),
        text("euro_x84_252_bytes", "length", "\u20ac" * 84, "refused", "84 characters"),
        text("emoji_x62_248_bytes", "length", "\U0001f600" * 62, "stored", "124 UTF-16 code units"),
        text("emoji_x63_252_bytes", "length", "\U0001f600" * 63, "refused", "126 UTF-16 code units"),
    ]


# --- hostile_pages.json ------------------------------------------------------------------------------------------

UNTRUSTED = "203.0.113.9"
PROXY = "10.0.0.5"


def page(
    name: str,
    note: str,
    headers: list[list[str]],
    expected: str | None,
    *,
    target: str = "/p",
    peer: str = UNTRUSTED,
    scheme: str = "http",
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "note": note,
        "options": options or {},
        "request": {"peer": peer, "scheme": scheme, "target": target, "headers": headers},
        "expected": {"key": expected} if expected else {"not_stored": "host"},
    }


TRUSTING = {"trusted_proxies": ["10.0.0.0/8"]}
SITE = {"site": "shop.example"}


def page_cases() -> list[dict[str, Any]]:
    return [
        page("plain_host", "the Host, as the front keys it", [["Host", "shop.example"]], "GET:http://shop.example/p"),
        page("host_case_and_default_port", "§2 step 4", [["Host", "Shop.Example:80"]], "GET:http://shop.example/p"),
        page("host_other_port", "a port is part of the site", [["Host", "shop.example:8080"]],
             "GET:http://shop.example:8080/p"),
        page("ipv4_host", "", [["Host", "192.0.2.1:8080"]], "GET:http://192.0.2.1:8080/p"),
        page("ipv6_host", "", [["Host", "[2001:db8::1]:8080"]], "GET:http://[2001:db8::1]:8080/p"),
        page("no_host", "no authority at all", [["Accept", "*/*"]], None),
        page("two_hosts", "which one would the front use?", [["Host", "shop.example"], ["Host", "evil.example"]],
             None),
        page("empty_host", "", [["Host", ""]], None),
        page("host_with_path", "Host: victim.example/admin", [["Host", "victim.example/admin"]], None),
        page("host_with_escaped_path", "", [["Host", "victim.example%2fadmin"]], None),
        page("host_with_userinfo", "Host: evil@victim.example", [["Host", "evil@victim.example"]], None),
        page("host_with_query", "", [["Host", "victim.example?x"]], None),
        page("host_with_fragment", "", [["Host", "victim.example#x"]], None),
        page("host_with_backslash", "", [["Host", "victim.example\\admin"]], None),
        page("host_with_comma", "a list", [["Host", "victim.example,evil.example"]], None),
        page("host_with_space", "", [["Host", "victim.example evil"]], None),
        page("host_port_empty", "Host: victim.example:", [["Host", "victim.example:"]], None),
        page("host_port_too_big", "", [["Host", "victim.example:99999"]], None),
        page("host_port_six_digits", "", [["Host", "victim.example:000080"]], None),
        page("host_port_signed", "", [["Host", "victim.example:+80"]], None),
        page("host_ipv6_unclosed", "", [["Host", "[2001:db8::1"]], None),
        page("host_ipv6_trailing", "", [["Host", "[2001:db8::1]x"]], None),
        page("host_ipv6_empty", "", [["Host", "[]"]], None),
        page("x_forwarded_host_untrusted", "ignored from an untrusted peer",
             [["Host", "victim.example"], ["X-Forwarded-Host", "evil.example"]], "GET:http://victim.example/p"),
        page("forwarded_untrusted", "ignored from an untrusted peer",
             [["Host", "victim.example"], ["Forwarded", "host=evil.example;proto=https"]],
             "GET:http://victim.example/p"),
        page("x_forwarded_proto_untrusted", "ignored: the scheme stays the connection's",
             [["Host", "victim.example"], ["X-Forwarded-Proto", "https"]], "GET:http://victim.example/p"),
        page("x_forwarded_host_trusted", "the proxy said so, as it would to the front",
             [["Host", "internal:8080"], ["X-Forwarded-Host", "shop.example"]], "GET:http://shop.example/p",
             peer=PROXY, options=TRUSTING),
        page("x_forwarded_host_trusted_first_element", "the first element, as the front reads it",
             [["Host", "internal"], ["X-Forwarded-Host", "shop.example, evil.example"]],
             "GET:http://shop.example/p", peer=PROXY, options=TRUSTING),
        page("x_forwarded_proto_trusted", "https from the trusted proxy",
             [["Host", "shop.example"], ["X-Forwarded-Proto", "https"]], "GET:https://shop.example/p",
             peer=PROXY, options=TRUSTING),
        page("forwarded_trusted", "the first element's host and proto",
             [["Host", "internal"], ["Forwarded", "host=shop.example;proto=https, host=evil.example"]],
             "GET:https://shop.example/p", peer=PROXY, options=TRUSTING),
        page("forwarded_disagrees_with_x_forwarded", "both speak and disagree",
             [["Host", "internal"], ["Forwarded", "host=shop.example"], ["X-Forwarded-Host", "evil.example"]],
             None, peer=PROXY, options=TRUSTING),
        page("x_forwarded_proto_not_http", "neither http nor https",
             [["Host", "shop.example"], ["X-Forwarded-Proto", "gopher"]], None, peer=PROXY, options=TRUSTING),
        page("x_forwarded_host_trusted_hostile", "a trusted claim must be plain too",
             [["Host", "internal"], ["X-Forwarded-Host", "evil@victim.example"]], None, peer=PROXY,
             options=TRUSTING),
        page("ipv4_mapped_trusted_peer", "an IPv4-mapped IPv6 peer counts as the IPv4 address",
             [["Host", "internal"], ["X-Forwarded-Host", "shop.example"]], "GET:http://shop.example/p",
             peer="::ffff:10.0.0.5", options=TRUSTING),
        page("peer_outside_trusted_net", "the list is not everyone",
             [["Host", "victim.example"], ["X-Forwarded-Host", "evil.example"]], "GET:http://victim.example/p",
             peer="11.0.0.5", options=TRUSTING),
        page("site_matches", "keyed on the site", [["Host", "SHOP.example:80"]], "GET:http://shop.example/p",
             options=SITE),
        page("site_other_host", "another site's Host", [["Host", "other.example"]], None, options=SITE),
        page("site_port_mismatch", "a port is part of the site", [["Host", "shop.example:8080"]], None,
             options=SITE),
        page("site_x_forwarded_host_untrusted", "ignored; the Host is the site's",
             [["Host", "shop.example"], ["X-Forwarded-Host", "evil.example"]], "GET:http://shop.example/p",
             options=SITE),
        page("site_trusted_forwarded_other", "even a trusted proxy cannot name another site",
             [["Host", "shop.example"], ["X-Forwarded-Host", "evil.example"]], None, peer=PROXY,
             options={**SITE, **TRUSTING}),
        page("absolute_target_same_authority", "HTTP.md §2 step 2: an absolute-form target is never stored, even "
             "when its authority is the Host's (RFC 9112 §3.2.2: the app ignores that Host; Go's net/http drops it)",
             [["Host", "shop.example"]], None, target="http://shop.example/p"),
        page("absolute_target_other_authority", "GET http://evil.example/ with Host: victim.example",
             [["Host", "victim.example"]], None, target="http://evil.example/p"),
        page("absolute_target_userinfo", "", [["Host", "victim.example"]], None,
             target="http://evil@victim.example/p"),
        page("scheme_option", "the page cache's scheme option wins",
             [["Host", "shop.example"]], "GET:https://shop.example/p", options={"scheme": "https"}),
        page("tls_connection", "the scheme of the connection the app received",
             [["Host", "shop.example"]], "GET:https://shop.example/p", scheme="https"),
    ]


# --- hostile_files.json ------------------------------------------------------------------------------------------


def op(name: str, expect: str, **args: str) -> dict[str, Any]:
    return {"op": name, **args, "expect": expect}


REFUSE_THROUGH_LINK = [
    op("get", "miss", key="k1"),
    op("get_many", "miss", key="k1"),
    op("set", "error", key="k1"),
    op("add", "error", key="k1"),
    op("delete", "noop", key="k1"),
    op("delete_if", "noop", key="k1"),
    op("purge_prefix", "ok", prefix=""),
    op("purge_tag", "ok", tag="t"),
    op("set", "ok", key="k9"),
    op("get", "hit", key="k9"),
]


def file_cases() -> list[dict[str, Any]]:
    def case(name: str, note: str, operations: list[dict[str, Any]], url_query: str = "") -> dict[str, Any]:
        return {"name": name, "note": note, "url_query": url_query, "keys": ["k1", "k2", "k3", "k9"],
                "operations": operations}

    return [
        case("linked_top_shard", "<root>/<h[0..2]> of k1 is a link to OUTSIDE/top, which holds a file of the "
             "store's form for k1: nothing is read, written or deleted through it", REFUSE_THROUGH_LINK),
        case("linked_second_shard", "<root>/<h[0..2]>/<h[2..4]> of k1 is a link to OUTSIDE/second (issue 32 #2)",
             REFUSE_THROUGH_LINK),
        case("linked_entry", "k1's file is a link to OUTSIDE/entry, a file of the store's form for k1: not read, "
             "not replaced, not deleted", REFUSE_THROUGH_LINK),
        case("dangling_entry_link", "k1's file is a link to OUTSIDE/absent, which must not come to exist",
             [op("get", "miss", key="k1"), op("set", "error", key="k1"), op("add", "error", key="k1"),
              op("delete", "noop", key="k1"), op("purge_prefix", "ok", prefix="")]),
        case("entry_link_to_directory", "k1's file is a link to the directory OUTSIDE/dir",
             [op("get", "miss", key="k1"), op("set", "error", key="k1"), op("delete", "noop", key="k1"),
              op("purge_prefix", "ok", prefix="")]),
        case("foreign_files", "an operator's files beside the store's own: notes.txt at the root, a README in a "
             "shard, a file that is not LDR1 at k2's name, a valid file of another key at k3's name; purges and "
             "reads leave them (only the store's own k9, written here, is purged)",
             [op("get", "miss", key="k2"), op("get", "miss", key="k3"), op("set", "ok", key="k9"),
              op("purge_prefix", "ok", prefix=""), op("purge_tag", "ok", tag="t"), op("get", "miss", key="k9")]),
        case("fifo_entry", "k1's file is a FIFO nobody writes: a read must not block (5 s bound), purges leave it",
             [op("get", "miss", key="k1"), op("get_many", "miss", key="k1"), op("purge_prefix", "ok", prefix=""),
              op("set", "ok", key="k9"), op("get", "hit", key="k9")]),
        case("linked_root", "the root itself is a link to OUTSIDE/real (operators move caches so): followed",
             [op("set", "ok", key="k1"), op("get", "hit", key="k1")]),
        case("modes_default", "files 0600, directories 0700 (less the umask)",
             [op("set", "ok", key="k1"), op("add", "ok", key="k2"), op("get", "hit", key="k1")]),
        case("modes_0640", "mode=0640: files 0640, directories 0750", [op("set", "ok", key="k1")], "mode=0640"),
        case("modes_0644", "mode=0644: files 0644, directories 0755", [op("set", "ok", key="k1")], "mode=0644"),
        case("mode_setuid_refused", "bits beyond the permissions", [op("open", "url_error")], "mode=4600"),
        case("mode_owner_cannot_write", "the owner needs read and write", [op("open", "url_error")], "mode=0400"),
        case("mode_not_octal", "", [op("open", "url_error")], "mode=0680"),
        case("mode_too_long", "three or four digits", [op("open", "url_error")], "mode=00600"),
    ]


# --- hostile_replies.json ----------------------------------------------------------------------------------------

OPERATIONS = ["get", "get_many", "set", "add", "incr", "delete", "delete_if", "purge_tag", "purge_prefix"]
AT_ONCE = {"within_ms": 2000, "timeout": "5s"}
SLOW = {"within_ms": 1800, "timeout": "300ms"}


def reply(protocol: str, behaviour: str, args: list[str], note: str, bound: dict[str, Any]) -> dict[str, Any]:
    query = f"timeout={bound['timeout']}" + ("&prefix_purge=true" if protocol == "memcached" else "")
    return {
        "name": f"{protocol}_{behaviour.replace('-', '_')}",
        "note": note,
        "protocol": protocol,
        "behaviour": behaviour,
        "server_args": args,
        "url_query": query,
        "operations": OPERATIONS,
        "within_ms": bound["within_ms"],
    }


def reply_cases() -> list[dict[str, Any]]:
    cases = []
    for protocol in ("memcached", "redis"):
        cases += [
            reply(protocol, "drip", ["--interval-ms", "50"], "one byte every 50 ms: a total deadline, not per read",
                  SLOW),
            reply(protocol, "silent", [], "nothing at all", SLOW),
            reply(protocol, "huge", ["--size", str(1 << 30)], "a 1 GiB value: refused when announced", AT_ONCE),
            reply(protocol, "endless-line", ["--size", str(1 << 30)], "a line that never ends: refused past 8 KiB",
                  AT_ONCE),
            reply(protocol, "garbage", [], "64 KiB of random bytes", AT_ONCE),
        ]
    cases.append(reply("redis", "nested", ["--depth", "100000"], "arrays 100,000 deep: at most 8", AT_ONCE))
    cases.append(reply("redis", "wide", ["--count", "1000", "--size", str(64 << 20)],
                       "1,000 strings of 64 MiB, each within max_value, in one array: the whole reply is refused at "
                       "its first line (issue 32 #4)", AT_ONCE))
    cases.append(reply("memcached", "wide", ["--count", "10000", "--size", str(512 << 10)],
                       "10,000 values of 512 KiB, each within max_item: past the whole reply's bound", AT_ONCE))
    return cases


# --- writing -----------------------------------------------------------------------------------------------------


def documents() -> dict[str, dict[str, Any]]:
    return {
        "hostile_keys.json": {"schema": 1, "entry_hex": ENTRY_HEX, "sentinel": SENTINEL, "cases": key_cases()},
        "hostile_pages.json": {"schema": 1, "cases": page_cases()},
        "hostile_files.json": {"schema": 1, "entry_hex": ENTRY_HEX, "cases": file_cases()},
        "hostile_replies.json": {"schema": 1, "entry_hex": ENTRY_HEX, "cases": reply_cases()},
    }


def main() -> int:
    check = "--check" in sys.argv[1:]
    stale = []
    for name, document in documents().items():
        names = [c["name"] for c in document["cases"]]
        if len(names) != len(set(names)):
            sys.exit(f"{name}: duplicate case names")
        text_out = json.dumps(document, indent=1, ensure_ascii=True) + "\n"
        path = HERE / name
        if check:
            if not path.exists() or path.read_text() != text_out:
                stale.append(name)
        else:
            path.write_text(text_out)
    if stale:
        print(f"not current: {', '.join(stale)}; run python3 spec/vectors/hostile_reference.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
