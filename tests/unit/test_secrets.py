"""The masker: every form of a secret (also percent-encoded and in base64 at any offset), each
line of a multi-line one, never trivial values, nothing unrelated; report values bounded with a
marker."""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_connic.jsonsafe import masked
from pytest_connic.secrets import MASK, Masker, secret_forms, secret_values_from_env, truncation_marker

PEM = "-----BEGIN KEY-----\nMIIEvQIBADANBgkqhkiG9w0\n  BKcwggSjAgEAAoIBAQC7VJ  \nab\n-----END KEY-----"
QUOTED = "q\"u'o\\te-pass"
UNICODE = "tök€n-Ünïcødé"


@pytest.mark.parametrize("render", [
    lambda v: v,
    lambda v: json.dumps(v),
    lambda v: json.dumps(v, ensure_ascii=True),
    repr,
    ascii,
    lambda v: repr(["'", v]),  # inside a list whose repr quotes with '
], ids=["plain", "json", "json-ascii", "repr", "ascii", "repr-in-list"])
@pytest.mark.parametrize("secret", [QUOTED, UNICODE, "plain-secret-value"])
def test_every_quoted_form_is_masked(render, secret: str) -> None:
    masker = Masker([secret])
    text = f"before {render(secret)} after"
    out = masker.text(text)
    assert MASK in out
    for form in secret_forms(secret):
        assert form not in out


def test_each_line_of_a_multi_line_value_is_masked_and_short_lines_are_not() -> None:
    masker = Masker([PEM])
    out = masker.text("line MIIEvQIBADANBgkqhkiG9w0 and BKcwggSjAgEAAoIBAQC7VJ and ab and -----END KEY-----")
    assert out == "line *** and *** and ab and ***"
    assert masker.text(json.dumps(PEM)) == '"***"'


def test_short_and_trivial_values_never_mask() -> None:
    masker = Masker(["1", "true", "abc", "12345"])
    assert not masker.active
    assert masker.text("1 true abc 12345 ab") == "1 true abc 12345 ab"
    lines = Masker(["ab\ncd\nef"])  # the value is masked whole, its short lines never alone
    assert lines.text("ab\ncd\nef ab cd ef") == "*** ab cd ef"
    assert secret_values_from_env({"API_KEY": "short", "TOKEN": "long-enough", "HOME": "/home/user/x"}) == {
        "long-enough"}


def test_find_and_data() -> None:
    masker = Masker([UNICODE])
    assert masker.find(json.dumps({"k": UNICODE}, ensure_ascii=True))
    assert not masker.find("nothing here")
    assert masker.data({UNICODE: [UNICODE, 1]}) == {MASK: [MASK, 1]}


def test_report_values_are_cut_with_a_marker_and_a_secret_across_the_cut_is_masked() -> None:
    masker = Masker(["secret-across-the-cut"], report_limit=100)
    value = "x" * 90 + "secret-across-the-cut" + "y" * 1000
    out = masker.report_text(value)
    assert out == "x" * 90 + "***" + "y" * 7 + truncation_marker(len(value), len(value) - 100)
    assert out.endswith("… [truncated: 1111 characters, 1011 cut]")
    assert "secret" not in out
    assert masker.report_text("short") == "short"


def test_masked_bounds_every_string_of_a_value_and_leaves_it_whole_without_a_limit() -> None:
    big = {"output": "z" * 100_000, "bytes": b"\x00" * 100_000, "small": "ok"}
    bounded = masked(big, Masker(report_limit=1000))
    assert len(json.dumps(bounded)) < 3000
    assert bounded["small"] == "ok"
    assert bounded["output"].endswith("… [truncated: 100000 characters, 99000 cut]")
    assert masked(big, Masker())["output"] == "z" * 100_000


def test_a_secret_json_encoded_inside_json_is_masked_at_every_depth() -> None:
    import json

    from pytest_connic.secrets import Masker

    secret = "q\"u'o\\te-pass-77"
    masker = Masker([secret])
    text = json.dumps({"a": secret})
    for depth in range(5):
        assert secret not in masker.text(text) and "***" in masker.text(text), depth
        assert masker.find(text)
        text = json.dumps({"i": text}, ensure_ascii=depth % 2 == 0)


def test_a_urls_password_is_masked_known_or_not() -> None:
    from pytest_connic.secrets import Masker, url_passwords

    text = "crm=https://user:tok-9f3a@mcp.example/x, redis://:pw@h, http://plain@host/ and https://h/a:b@c"
    assert Masker().text(text) == "crm=https://user:***@mcp.example/x, redis://:***@h, http://plain@host/ and https://h/a:b@c"
    assert url_passwords(text) == {"tok-9f3a", "pw"}
    assert Masker().find("https://u:p@h") and not Masker().find("https://u@h")


# ----------------------------------------------------------------- encoded forms (issue 39)

SPACED = "s3cr3t pass/wörd+1~"  # a space, reserved characters, non-ASCII (two UTF-8 bytes)
B64_RUN = re.compile(r"[A-Za-z0-9+/=_-]+")


def revealed(text: str, secret: str) -> bool:
    """Whether any run of base64 characters in ``text``, decoded at any of its four phases with
    either alphabet, holds ``secret`` (as UTF-8): the secret's bits are still readable."""
    wanted = secret.encode("utf-8")
    for run in B64_RUN.findall(text):
        run = run.rstrip("=").translate(str.maketrans("-_", "+/"))
        for phase in range(4):
            chunk = run[phase:]
            if len(chunk) % 4 == 1:  # no whole byte in a last lone character
                chunk = chunk[:-1]
            if wanted in base64.b64decode(chunk + "=" * (-len(chunk) % 4), validate=True):
                return True
    return False


def exactly_masked(token: str, before: int, length: int) -> str:
    """``token`` (the base64 of ``before`` bytes, a secret of ``length`` bytes, then the rest) with
    exactly the characters that hold a bit of the secret masked, and the padding after it when it
    ends the token: the partial characters at its edges included, no other character."""
    first, last = 8 * before // 6, -(-8 * (before + length) // 6)
    rest = token[last:]
    return token[:first] + MASK + ("" if rest.strip("=") == "" else rest)


def encodings(raw: bytes) -> list[str]:
    std = base64.b64encode(raw).decode("ascii")
    url = base64.urlsafe_b64encode(raw).decode("ascii")
    return [std, url, std.rstrip("="), url.rstrip("=")]


@pytest.mark.parametrize("secret", [SPACED, QUOTED, UNICODE, "plain-secret-value", "abc123"])
def test_base64_of_a_longer_text_holding_the_secret_at_any_offset_is_masked(secret: str) -> None:
    """The three alignments of the secret in the encoded bytes, each prefix length (0..5 bytes
    before it) and suffix length, both alphabets, with and without padding: the encoded token is
    masked and what remains decodes to no copy of the secret; the text around it stays."""
    masker = Masker([secret])
    for before in ("", "u", "us", "use", "user", "user:"):
        for after in ("", "!", "!?", "!?#"):
            for token in encodings(f"{before}{secret}{after}".encode()):
                assert revealed(token, secret)  # the check itself sees the secret before masking
                out = masker.text(f"Authorization: Basic {token} (sent)")
                expected = exactly_masked(token, len(before), len(secret.encode("utf-8")))
                assert out == f"Authorization: Basic {expected} (sent)", (before, after, token)
                assert not revealed(out, secret)
                assert masker.find(token)


def test_basic_auth_of_user_and_secret_is_masked_in_every_report_shape() -> None:
    secret = "tok-9f3a-Zq"
    masker = Masker([secret])
    header = "Basic " + base64.b64encode(f"alice:{secret}".encode()).decode()
    assert masker.text(f"Authorization: {header}") == "Authorization: Basic YWxpY2U6***"
    assert not revealed(json.dumps(masker.data({"headers": {"Authorization": header}})), secret)
    # a JWT-like token: URL-safe base64 of JSON that holds the secret JSON-escaped
    quoted = 'q"u\\ote-pass'
    token = base64.urlsafe_b64encode(json.dumps({"sub": "x", "pw": quoted}).encode()).decode().rstrip("=")
    assert MASK in Masker([quoted]).text(token) and not revealed(Masker([quoted]).text(token), json.dumps(quoted)[1:-1])


@pytest.mark.parametrize("encode", [
    lambda v: urllib.parse.quote(v, safe=""),
    lambda v: urllib.parse.quote(v),  # leaves "/" alone
    urllib.parse.quote_plus,  # a space as "+"
    lambda v: re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), urllib.parse.quote(v, safe="")),  # lower hex
    lambda v: "".join(f"%{b:02x}" for b in v.encode("utf-8")),  # every byte, lower hex
    lambda v: urllib.parse.urlencode({"token": v}).partition("=")[2],
], ids=["all-reserved", "safe-slash", "plus", "lower-hex", "every-byte", "urlencode"])
def test_percent_encoded_forms_are_masked(encode: Callable[[str], str]) -> None:
    secret = "S3CR3T pass/wörd+1~"
    masker = Masker([secret])
    encoded = encode(secret)
    assert masker.text(f"GET /orders?page=2&token={encoded}&x=%20y") == "GET /orders?page=2&token=***&x=%20y"
    assert masker.find(f"https://api.example/cb?token={encoded}")


def test_a_secret_only_percent_encoded_in_part_of_a_longer_value_is_masked() -> None:
    secret = "pa ss/word-77"
    masker = Masker([secret])
    body = urllib.parse.urlencode({"q": f"login as admin with {secret} now"})
    out = masker.text(body)
    assert MASK in out and secret not in urllib.parse.unquote_plus(out)
    assert out.startswith("q=login+as+admin+with+") and out.endswith("+now")


def test_encoded_forms_of_each_line_of_a_multi_line_secret_are_masked() -> None:
    masker = Masker([PEM])
    line = "MIIEvQIBADANBgkqhkiG9w0"
    assert MASK in masker.text(base64.b64encode(f"key={line};".encode()).decode())
    assert masker.text(urllib.parse.quote(PEM, safe="")) == MASK


@pytest.mark.parametrize("text", [
    base64.b64encode(b"user:not-the-secret-at-all").decode(),  # other base64
    base64.b64encode(b"user:tok-9f3a-Z").decode(),  # the secret but its last character
    base64.b64encode(b"user:tok-9f3a-Zx").decode(),  # the secret with its last character changed
    base64.b64encode(b"user:Tok-9f3a-Zq").decode(),  # ... its first
    # only the bits the edge characters hold differ: the last 2 bits of "q" (0x71) in "r" (0x72), the
    # first 2 bits of "t" (0x74) in "4" (0x34); after "user:" the secret starts 4 bits into a character
    base64.b64encode(b"user:tok-9f3a-Zr").decode(),
    base64.b64encode(b"user:4ok-9f3a-Zq").decode(),
    urllib.parse.quote("tok-9f3a-Z q", safe=""),  # percent-encoded near misses
    "tok%2D9f3a%2DZ",
    "hello%20world and 50% off, a+b, c2VjcmV0 (base64 of 'secret')",  # ordinary text
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
])
def test_unrelated_and_near_miss_encodings_are_left_alone(text: str) -> None:
    masker = Masker(["tok-9f3a-Zq"])
    assert masker.text(text) == text
    assert not masker.find(text)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(secret=st.text(st.characters(blacklist_categories=("Cs",)), min_size=6, max_size=24),
       before=st.binary(max_size=7), after=st.binary(max_size=7), urlsafe=st.booleans(), padded=st.booleans())
def test_base64_masking_holds_for_any_secret_and_neighbours(secret: str, before: bytes, after: bytes,
                                                            urlsafe: bool, padded: bool) -> None:
    wanted = secret.encode("utf-8")
    raw = before + wanted + after
    token = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode("ascii")
    token = token if padded else token.rstrip("=")
    out = Masker([secret]).text(f"<{token}>")
    assert out.startswith("<") and out.endswith(">") and MASK in out
    assert not revealed(out, secret)
    if raw.count(wanted) == 1 and "\n" not in secret and "\r" not in secret:  # masked there alone
        assert out == f"<{exactly_masked(token, len(before), len(wanted))}>"


@settings(max_examples=60, deadline=None)
@given(secret=st.text(st.characters(blacklist_categories=("Cs",)), min_size=6, max_size=24),
       data=st.binary(min_size=0, max_size=64))
def test_base64_of_bytes_without_the_secret_is_left_alone(secret: str, data: bytes) -> None:
    wanted = secret.encode("utf-8")
    forms = {wanted} | {json.dumps(secret, ensure_ascii=a)[1:-1].encode() for a in (False, True)}
    if any(f in data for f in forms) or any(line.strip().encode() in data for line in secret.splitlines()
                                            if len(line.strip()) >= 6):
        return
    token = base64.b64encode(data).decode("ascii")
    assert Masker([secret]).text(f"[{token}]") in (f"[{token}]",)


@settings(max_examples=60, deadline=None)
@given(secret=st.text(st.characters(blacklist_categories=("Cs",)), min_size=6, max_size=24),
       before=st.text(max_size=8), after=st.text(max_size=8), plus=st.booleans())
def test_percent_masking_holds_for_any_secret_and_neighbours(secret: str, before: str, after: str,
                                                             plus: bool) -> None:
    encode = urllib.parse.quote_plus if plus else (lambda v: urllib.parse.quote(v, safe=""))
    out = Masker([secret]).text("q=" + encode(before + secret + after))
    decode = urllib.parse.unquote_plus if plus else urllib.parse.unquote
    assert MASK in out and secret not in decode(out)


def test_a_secret_cut_short_by_a_reports_value_limit_is_masked_to_its_head() -> None:
    from pytest_connic.expressions import format_value

    secret = "tök€n-Ünïcødé-9f3a"
    masker = Masker([secret])
    shown = format_value("x" * 187 + secret)  # cut inside the secret, as a failed check shows output
    assert secret[:5] in shown and secret not in shown  # the head alone is left before the mark

    masked = masker.text(f"output == 'y' failed, where output = {shown}")
    assert secret[:4] not in masked and masked.endswith("x***…")
    assert masker.text("a list…") == "a list…"  # no head of a secret before the mark: unchanged
    assert masker.text("tök€…") == "***…"  # four characters of its head are enough
    assert masker.text("tök…") == "tök…"  # three say nothing of it
