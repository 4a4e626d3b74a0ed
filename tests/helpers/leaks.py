"""What a leaked secret looks like, in any artifact: the value and its encodings (JSON, repr,
ASCII, HTML, percent-encoded, base64), for tests that plant secrets and search every output."""

from __future__ import annotations

import base64
import html
import json
import urllib.parse


def encoded(value: str) -> list[str]:
    """The encoded forms a leaking tool or model writes: percent-encoded (``%20``, ``+``), base64 of
    ``alice:`` and the value, URL-safe base64 of ``x`` and the value."""
    return [urllib.parse.quote(value, safe=""), urllib.parse.urlencode({"password": value}).partition("=")[2],
            base64.b64encode(("alice:" + value).encode()).decode(),
            base64.urlsafe_b64encode(("x" + value).encode()).decode().rstrip("=")]


def forms(value: str) -> set[str]:
    """What a leak of ``value`` would look like, in any artifact."""
    pieces = {value} | {line for line in value.splitlines() if len(line) >= 6}
    out: set[str] = set(encoded(value))
    for p in pieces:
        out |= {p, json.dumps(p)[1:-1], json.dumps(p, ensure_ascii=False)[1:-1], repr(p)[1:-1], ascii(p)[1:-1],
                html.escape(p), html.escape(p, quote=False)}
    return out


#: a tool that leaks the values of ``API_TOKEN``, ``PRIVATE_KEY`` and ``DB_PASSWORD`` in every
#: form: returned, printed (stdout, stderr), logged and warned
LEAK_TOOL = '''
import base64
import json
import logging
import os
import sys
import urllib.parse
import warnings


def leak(x: int) -> dict:
    """Leak every secret in every form.

    Args:
        x: unused
    """
    values = [os.environ["API_TOKEN"], os.environ["PRIVATE_KEY"], os.environ["DB_PASSWORD"]]
    forms = {}
    for i, v in enumerate(values):
        forms[f"plain{i}"] = v
        forms[f"json{i}"] = json.dumps(v)
        forms[f"ascii{i}"] = json.dumps(v, ensure_ascii=True)
        forms[f"repr{i}"] = repr(v)
        forms[f"lines{i}"] = v.splitlines()
        forms[f"query{i}"] = "https://api.example/cb?token=" + urllib.parse.quote(v, safe="") + "&page=2"
        forms[f"form{i}"] = urllib.parse.urlencode({"user": "alice", "password": v})
        forms[f"basic{i}"] = "Basic " + base64.b64encode(("alice:" + v).encode()).decode()
        forms[f"urlsafe{i}"] = base64.urlsafe_b64encode(("x" + v).encode()).decode().rstrip("=")
        print("stdout", v, json.dumps(v), repr(v), ascii(v), forms[f"query{i}"], forms[f"basic{i}"])
        print("stderr", v, repr(v), file=sys.stderr)
        logging.getLogger("leaky").warning("log %s %r", v, v)
        warnings.warn(f"warn {v} {v!r}")
    return forms
'''
#: a Python test of a project that leaks the same values in every way pytest captures them (it reads
#: ``.env.staging`` itself: under xdist, its worker may never load the env file)
PLAIN_LEAK_TEST = '''
import json
import logging
import os
import sys
import warnings
from pathlib import Path


def test_plain_python_leaks():
    token = (Path(__file__).parents[1] / ".env.staging").read_text("utf-8").split('"')[1]
    values = [token, os.environ["PRIVATE_KEY"], os.environ["DB_PASSWORD"]]
    for v in values:
        print("plain stdout", v, json.dumps(v), repr(v))
        print("plain stderr", ascii(v), file=sys.stderr)
        logging.getLogger("plain").error("plain log %r", v)
        warnings.warn(UserWarning("plain warn " + json.dumps(v, ensure_ascii=True)))
    raise RuntimeError(f"plain raise {values!r} {json.dumps(values)}")
'''
