"""The masker: every form of a secret, each line of a multi-line one, never trivial values;
report values bounded with a marker."""

from __future__ import annotations

import json

import pytest

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
