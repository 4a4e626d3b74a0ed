"""One table of settings feeds ``addoption`` and ``addini``; one resolver applies
CLI > ini > default and remembers where each value came from, so a bad value's
error names its source."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_connic.models.matching import MatchRule

RECORD_MODES = ("none", "once", "new_runs", "all", "digests")
AB_MODES = ("exploratory", "confidence")
FLAKY_MODES = ("report", "fail", "skip")
REPLAY_MODES = ("strict", "lenient")
#: the kinds of ``models/volatile.py`` (a copy: the option table imports nothing heavy)
VOLATILE_KINDS = ("uuid", "hex", "time")


@dataclass(frozen=True)
class Setting:
    """One user-facing setting."""

    name: str  #: attribute name, ``--connic-<name>`` and ini ``connic_<name>``
    help: str
    kind: str = "str"  #: str | int | float (a percentage) | number (positive) | seconds | bool | list | choice | path
    default: Any = None
    choices: tuple[str, ...] = ()
    cli: bool = True
    ini: bool = True
    ini_name: str | None = None
    metavar: str | None = None

    @property
    def option(self) -> str:
        return "--connic-" + self.name.replace("_", "-")

    @property
    def ini_key(self) -> str:
        return self.ini_name or f"connic_{self.name}"


SETTINGS: tuple[Setting, ...] = (
    Setting("record_mode", "cassette mode: none (replay only, default), once, new_runs, all, digests (replay, and add "
            "the request digests to hand-written turns)",
            kind="choice", default="none", choices=RECORD_MODES),
    Setting("live", "call the real model providers (LiteLLM) and ignore cassettes", kind="bool",
            default=False, ini=False),
    Setting("cassette_dir", "where cassettes live, relative to the project root", default="cassettes",
            cli=True, metavar="DIR"),
    Setting("model_alias", "map a Connic-hosted model to a LiteLLM model: connic/x=openai/y (repeatable)",
            kind="list", default=(), ini_name="connic_model_aliases", metavar="FROM=TO"),
    Setting("model_price", "the price of a model in US dollars per million input/output tokens, for aliases, "
            "local and unknown models: MODEL=IN/OUT, e.g. openai/gpt-4.1-mini=0.4/1.6 (repeatable; default: "
            "LiteLLM's price map)", kind="list", default=(), ini_name="connic_model_prices", metavar="MODEL=IN/OUT"),
    Setting("api_spec", "the OpenAPI spec of api:NAME tools, relative to the project root (repeatable; "
            "default: apis/NAME.yaml|yml|json)", kind="list", default=(), ini_name="connic_api_specs",
            metavar="NAME=PATH"),
    Setting("api_url", "where requests of api:NAME tools go instead of the spec's server (repeatable)",
            kind="list", default=(), ini_name="connic_api_urls", metavar="NAME=URL"),
    Setting("mcp_url", "point an agent's MCP server at another URL: NAME=URL (repeatable; NAME is the "
            "server's name in mcp_servers)", kind="list", default=(), ini_name="connic_mcp_urls", metavar="NAME=URL"),
    Setting("concurrency", "runs of one case executing at once (1 = sequential)", kind="int", default=8,
            metavar="N"),
    Setting("early_stop", "stop starting runs of a case once its verdict is decided", kind="bool",
            default=False),
    Setting("filter", "run only the cases whose name contains TEXT, as connic test --filter (case-sensitive, "
            "the case's name only; other tests are left alone)", ini=False, metavar="TEXT"),
    Setting("isolation", "where user code runs: process (a worker process per run, default; timeout_s is a "
            "hard bound) or none (in pytest's process, for pdb)", kind="choice", default="process",
            choices=("process", "none")),
    Setting("worker_memory_mb", "address-space limit of a worker process in MiB (default 4096)", kind="int",
            default=4096, cli=False, metavar="MIB"),
    Setting("json", "write the machine-readable report (connic test --json shape) to PATH", kind="path",
            ini=False, metavar="PATH"),
    Setting("html", "write a self-contained HTML report to PATH", kind="path", ini=False, metavar="PATH"),
    Setting("traces", "write one JSON trace file per run into DIR", kind="path", ini=False, metavar="DIR"),
    Setting("coverage", "print Connic's static coverage report (no agent runs)", kind="bool", default=False,
            ini=False),
    Setting("coverage_json", "write the coverage report as JSON to PATH", kind="path", ini=False,
            metavar="PATH"),
    Setting("coverage_fail_under", "fail when overall coverage is below PCT", kind="float", metavar="PCT"),
    Setting("env", "load <project>/.env.NAME into the environment of user code", metavar="NAME"),
    Setting("report_value_limit", "longest text (characters) a report keeps of one value; longer values are "
            "cut with a marker saying how much (default 65536); the checks see the whole value", kind="int",
            default=65536, metavar="N"),
    Setting("match_rules", "matching rules: parts of a request left out of the comparison with its recording, "
            "one per line in YAML: `ignore: PATH` or `{replace: 'REGEX', with: '<placeholder>'}` "
            "(docs/models.md, \"Matching rules\")", kind="list", default=(), cli=False,
            ini_name="connic_match_rules"),
    Setting("replay", "a replayed request that differs from its recording: strict (the case fails, saying what "
            "changed, default) or lenient (a CassetteDivergenceWarning, the case keeps its verdict; docs/models.md, "
            "\"Replay you can trust\")", kind="choice", default="strict", choices=REPLAY_MODES),
    Setting("volatile", "the kinds of volatile value a recording leaves out of its request digests, one per line: "
            "uuid, hex, time (default all three; none: none)", kind="list", default=VOLATILE_KINDS, cli=False,
            ini_name="connic_volatile"),
    Setting("cassette_size_limit", "largest cassette file read, in bytes (default 10485760, 10 MiB)", kind="int",
            default=10 * 1024 * 1024, metavar="BYTES"),
    Setting("guardrail_model", "the judge model (a LiteLLM model string) that records the judgements of "
            "model-based guardrails (prompt_injection, moderation, ...) while recording", metavar="MODEL"),
    Setting("unjudged_guardrails", "a model-based guardrail check with no judgement (hook, cassette, judge "
            "model): error (the case fails, default) or pass (counted as passed, shown as not evaluated)",
            kind="choice", default="error", choices=("error", "pass")),
    Setting("merge", "merge the --connic-json reports of shards (a path or glob, repeatable) into this "
            "session's reports instead of running cases (docs/ci.md)", kind="list", default=(), ini=False,
            metavar="PATH"),
    Setting("merge_foreign", "a merged shard with cases whose suite file is not in this checkout: warn "
            "(default: one warning per shard) or error (nothing is merged; for CI)", kind="choice", default="warn",
            choices=("warn", "error")),
    Setting("progress_interval", "seconds between progress lines of a long run (cases, runs, tokens, cost "
            "so far; default 30, 0: after every case, off: never; never with -q)", kind="seconds", default=30.0,
            cli=False,
            metavar="SECONDS"),
    Setting("junit_properties", "add per-case properties to JUnit XML (default: with junit_family xunit1 or "
            "legacy, whose schema has them; not with pytest's default xunit2, whose schema has none)",
            kind="bool", default=None, cli=False),
    Setting("ab", "compare the base agent with a variant ({base}-test-{name}), or 'all'", ini=False,
            metavar="VARIANT"),
    Setting("ab_mode", "A/B mode: exploratory (default) or confidence", kind="choice", default="exploratory",
            choices=AB_MODES),
    # A/B options (docs/ab-testing.md, "Running a comparison"); rates and effects in percent
    Setting("ab_min_runs", "A/B exploratory: runs per arm and case, at least (default 10; more if the case "
            "has more runs)", kind="int", default=10, metavar="N"),
    Setting("ab_baseline", "A/B confidence plan: expected pass rate of the control in percent (default 90)",
            kind="float", default=90.0, metavar="PCT"),
    Setting("ab_mde", "A/B confidence plan: minimum detectable improvement in percentage points (default 10); "
            "with a margin, the assumed true difference (default 0)", kind="float", metavar="PP"),
    Setting("ab_margin", "A/B confidence plan: non-inferiority margin in percentage points (makes the "
            "objective non-inferiority)", kind="float", metavar="PP"),
    Setting("ab_confidence", "A/B confidence level in percent (default 95)", kind="float", default=95.0,
            metavar="PCT"),
    Setting("ab_power", "A/B confidence plan: power in percent (default 80)", kind="float", default=80.0,
            metavar="PCT"),
    Setting("ab_futility", "A/B confidence plan: stop a case at an interim look when its conditional power "
            "is below PCT (optional, non-binding)", kind="float", metavar="PCT"),
    Setting("ab_safety_window", "A/B safety: rolling window of finished variant runs (default 10)", kind="int",
            default=10, metavar="N"),
    Setting("ab_safety_threshold", "A/B safety: pause the variant when more than PCT of the runs in a full "
            "window failed (default 50)", kind="float", default=50.0, metavar="PCT"),
    # across sessions (docs/history.md)
    Setting("history", "the history file sessions append to (default .pytest_cache/connic/history.sqlite; "
            "'none' keeps no history)", kind="path", metavar="PATH"),
    Setting("since", "mark what changed since the last session at git commit REF (default: since the "
            "previous session of the same selection)", ini=False, metavar="REF"),
    Setting("flaky", "what a flaky case does to the exit code: report (default: nothing), fail (the session "
            "fails), skip (its failure does not fail the session)", kind="choice", default="report",
            choices=FLAKY_MODES),
    Setting("flaky_window", "sessions a flip counts in for flakiness (default 10)", kind="int", default=10,
            metavar="N"),
    Setting("compare", "at the session's end, show what changed per case since REF: a session of the history "
            "(last, -2, a session number, a git commit or branch: its last session) or a --connic-json report "
            "file (docs/history.md, \"Comparing sessions\")", ini=False, metavar="REF"),
    Setting("summary", "write a Markdown summary of the session (and of --connic-compare) to PATH; under GitHub "
            "Actions it is also appended to $GITHUB_STEP_SUMMARY", kind="path", ini=False, metavar="PATH"),
    Setting("budget_tokens", "stop starting runs once the session's runs used N tokens (across xdist workers)",
            kind="int", metavar="N"),
    Setting("budget_cost", "stop starting runs once the session's runs cost USD (across xdist workers)",
            kind="number", metavar="USD"),
)

def add_options(parser: pytest.Parser) -> None:
    """Declare every setting as an option in group ``connic`` and as an ini key."""
    group = parser.getgroup("connic", "Connic agent test suites")
    for s in SETTINGS:
        if s.cli:
            if s.kind == "bool":
                group.addoption(s.option, action="store_true", default=None, dest=f"connic_{s.name}", help=s.help)
            elif s.kind == "list":
                group.addoption(s.option, action="append", default=None, dest=f"connic_{s.name}",
                                metavar=s.metavar, help=s.help)
            else:
                group.addoption(s.option, default=None, dest=f"connic_{s.name}", metavar=s.metavar, help=s.help)
        if s.ini:
            parser.addini(s.ini_key, s.help, type=_ini_type(s.kind), default=None)


#: pytest 9.2 takes a type expression such as ``int | str`` for an ini key
_TYPE_EXPRESSIONS = tuple(int(p) for p in pytest.__version__.split(".")[:2] if p.isdigit()) >= (9, 2)


def _ini_type(kind: str) -> Any:
    """How pytest reads the ini key of a setting of ``kind``. Numbers and booleans are read as
    strings (pytest's own "bool" type raises a bare ValueError, an INTERNALERROR, on a bad value;
    ``_convert`` names the ini key instead), and from pytest 9.2 as their TOML type or a string,
    so that pytest 9's native ``[tool.pytest]`` table may hold ``connic_concurrency = 2`` and
    ``connic_early_stop = true`` as well as their quoted forms."""
    if kind == "list":
        return "linelist"
    scalar = {"int": int, "float": float, "number": float, "seconds": float, "bool": bool}.get(kind)
    return scalar | str if scalar is not None and _TYPE_EXPRESSIONS else "string"


def _positive_int(s: Setting, value: str | float) -> int:
    result = int(value)
    if result < 1:
        raise ValueError("must be at least 1")
    return result


def _seconds(s: Setting, value: str | float) -> float | None:
    """0 or more, or off (None)."""
    if str(value).strip().lower() == "off":
        return None
    seconds = float(value)
    if not seconds >= 0:  # also NaN
        raise ValueError("expected seconds (0 or more) or off")
    return seconds


def _percentage(s: Setting, value: str | float) -> float:
    fvalue = float(value)
    if not 0 <= fvalue <= 100:
        raise ValueError("must be a percentage from 0 to 100")
    return fvalue


def _positive_number(s: Setting, value: str | float) -> float:
    number = float(value)
    if not number > 0 or number == float("inf"):
        raise ValueError("must be a positive number")
    return number


def _boolean(s: Setting, value: str | float) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _choice(s: Setting, value: str) -> str:
    if value not in s.choices:
        raise ValueError(f"expected one of {', '.join(s.choices)}")
    return value


def _names(s: Setting, value: Iterable[object]) -> tuple[str, ...]:
    return tuple(str(v).strip() for v in value if str(v).strip())


#: a setting's value from its option or ini text, by ``Setting.kind`` (anything else: a string)
_CONVERTERS: dict[str, Callable[[Setting, Any], Any]] = {
    "int": _positive_int, "seconds": _seconds, "float": _percentage, "number": _positive_number,
    "bool": _boolean, "choice": _choice, "list": _names,
}


def _convert(s: Setting, value: Any, source: str) -> Any:
    if value is None:
        return None
    try:
        convert = _CONVERTERS.get(s.kind)
        return str(value) if convert is None else convert(s, value)
    except ValueError as exc:
        # quoted as the text it was written as, whether pytest read it as a string or (pytest 9.2,
        # ``int | str``) already as a number or a boolean
        shown = value if isinstance(value, (str, list, tuple)) else str(value)
        raise pytest.UsageError(f"invalid value {shown!r} from {source}: {exc}") from None


@dataclass(frozen=True)
class Settings:
    """The resolved settings (one field per entry of ``SETTINGS``); ``source(name)`` says
    where a value came from: ``--connic-<name>``, ``ini connic_<name>`` or ``default``."""

    record_mode: str
    live: bool
    cassette_dir: str
    model_alias: tuple[str, ...]
    model_price: tuple[str, ...]
    api_spec: tuple[str, ...]
    api_url: tuple[str, ...]
    mcp_url: tuple[str, ...]
    concurrency: int
    early_stop: bool
    filter: str | None
    isolation: str
    worker_memory_mb: int
    json: str | None
    html: str | None
    traces: str | None
    coverage: bool
    coverage_json: str | None
    coverage_fail_under: float | None
    env: str | None
    report_value_limit: int
    cassette_size_limit: int
    match_rules: tuple[str, ...]
    replay: str
    volatile: tuple[str, ...]
    guardrail_model: str | None
    unjudged_guardrails: str
    merge: tuple[str, ...]
    merge_foreign: str
    progress_interval: float | None
    junit_properties: bool
    ab: str | None
    ab_mode: str
    ab_min_runs: int
    ab_baseline: float
    ab_mde: float | None
    ab_margin: float | None
    ab_confidence: float
    ab_power: float
    ab_futility: float | None
    ab_safety_window: int
    ab_safety_threshold: float
    history: str | None
    since: str | None
    flaky: str
    flaky_window: int
    compare: str | None
    summary: str | None
    budget_tokens: int | None
    budget_cost: float | None
    sources: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        """Resolve every setting: CLI > ini > default; a bad value is a ``pytest.UsageError``
        naming its source."""
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for s in SETTINGS:
            values[s.name], sources[s.name] = _resolve(config, s)
        if values["junit_properties"] is None:
            values["junit_properties"] = junit_family(config) in JUNIT_FAMILIES_WITH_PROPERTIES
        settings = cls(**values, sources=sources)
        # NAME=VALUE pairs: refused at start (a usage error), naming their source
        settings.api_specs(), settings.api_urls(), settings.mcp_urls(), settings.matching_rules(),
        settings.model_prices(), settings.volatile_kinds()
        return settings

    def source(self, name: str) -> str:
        """Where the value of ``name`` came from: ``--connic-<name>``, ``ini connic_<name>`` or ``default``."""
        return self.sources[name]

    def needed_at_start(self) -> bool:
        """Whether these settings ask for Connic's session plugins whatever is collected: report
        files (written with no case too), coverage, A/B (whose options are checked at once), a
        filter (its notice when it leaves nothing to run, on an xdist controller too)."""
        return bool(self.json or self.html or self.traces or self.coverage or self.coverage_json or self.ab
                    or self.coverage_fail_under is not None or self.merge or self.filter)

    def matching_rules(self) -> tuple[MatchRule, ...]:
        """``connic_match_rules`` as ``MatchRule``s; a rule that cannot be used is a usage error
        naming the ini key and the line."""
        if not self.match_rules:  # none: the model package stays unimported in a plain project
            return ()
        from pytest_connic.models.matching import MatchRuleError, parse_ini_lines

        try:
            return parse_ini_lines(self.match_rules)
        except MatchRuleError as exc:
            raise pytest.UsageError(f"invalid matching rule from {self.source('match_rules')}, {exc}") from None

    def volatile_kinds(self) -> tuple[str, ...]:
        """``connic_volatile`` as kinds (``none`` alone: none); an unknown kind is a usage error."""
        kinds = tuple(k.lower() for k in self.volatile)
        if kinds == ("none",):
            return ()
        unknown = [k for k in kinds if k not in VOLATILE_KINDS]
        if unknown:
            raise pytest.UsageError(f"invalid value {unknown[0]!r} from {self.source('volatile')}: expected "
                                    f"{', '.join(VOLATILE_KINDS)} (one per line), or none")
        return kinds

    def model_aliases(self) -> dict[str, str]:
        """``--connic-model-alias`` entries as a mapping, validated."""
        return self._pairs("model_alias", "FROM=TO", "connic/gpt-5.6-terra=openai/gpt-4.1-mini")

    def model_prices(self) -> dict[str, tuple[float, float]]:
        """``connic_model_prices`` (``--connic-model-price``) entries: model -> dollars per million
        input and output tokens, validated."""
        if not self.model_price:  # none: the model package stays unimported in a plain project
            return {}
        from pytest_connic.models.pricing import parse_price

        pairs = self._pairs("model_price", "MODEL=IN/OUT (US dollars per million input/output tokens)",
                            "openai/gpt-4.1-mini=0.4/1.6", valid=lambda text: parse_price(text) is not None)
        return {model: parse_price(text) or (0.0, 0.0) for model, text in pairs.items()}

    def mcp_urls(self) -> dict[str, str]:
        """``--connic-mcp-url`` entries as a mapping (server name to URL), validated."""
        return self._pairs("mcp_url", "NAME=URL with an http(s) URL", "docs=http://127.0.0.1:8000/mcp",
                           valid=lambda url: url.lower().startswith(("http://", "https://")))

    def api_specs(self) -> dict[str, str]:
        """``--connic-api-spec NAME=PATH`` entries as a mapping, validated."""
        return self._pairs("api_spec", "NAME=PATH", "billing=specs/billing.yaml")

    def api_urls(self) -> dict[str, str]:
        """``--connic-api-url NAME=URL`` entries as a mapping, validated."""
        urls = self._pairs("api_url", "NAME=URL", "billing=http://127.0.0.1:8000")
        for name, url in urls.items():
            if not url.startswith(("http://", "https://")):
                raise pytest.UsageError(f"invalid value '{name}={url}' from {self.source('api_url')}: "
                                        "the URL must start with http:// or https://")
        return urls

    def _pairs(self, name: str, shape: str, example: str,
               valid: Callable[[str], bool] = bool) -> dict[str, str]:
        """``NAME=VALUE`` entries of setting ``name`` as a mapping; an entry without both sides (or
        whose value is not ``valid``) is a usage error naming its source, the shape and an example."""
        pairs: dict[str, str] = {}
        for entry in getattr(self, name) or ():
            left, sep, right = entry.partition("=")
            if not sep or not left.strip() or not right.strip() or not valid(right.strip()):
                raise pytest.UsageError(f"invalid value {entry!r} from {self.source(name)}: expected {shape}, "
                                        f"for example {example}")
            pairs[left.strip()] = right.strip()
        return pairs


def _resolve(config: pytest.Config, s: Setting) -> tuple[Any, str]:
    if s.cli:
        value = config.getoption(f"connic_{s.name}")
        if value is not None:
            return _convert(s, value, s.option), s.option
    if s.ini:
        raw = config.getini(s.ini_key)
        if raw not in (None, "", []):
            return _convert(s, raw, f"ini {s.ini_key}"), f"ini {s.ini_key}"
    return s.default, "default"


#: the ``junit_family`` values whose schema has ``<properties>`` in a ``<testcase>`` (pytest's
#: ``record_property`` is for them; pytest warns when it is used with ``xunit2``)
JUNIT_FAMILIES_WITH_PROPERTIES = ("xunit1", "legacy")


def junit_family(config: pytest.Config) -> str:
    """pytest's ``junit_family`` ini key (``xunit2`` by default, and when pytest's JUnit plugin is
    disabled: ``-p no:junitxml`` leaves the key undeclared)."""
    try:
        return str(config.getini("junit_family") or "xunit2")
    except ValueError:
        return "xunit2"


SETTINGS_KEY = pytest.StashKey[Settings]()
#: the secret values of the environment as the session started (the session's masker starts
#: with them, however late the session state is created)
ENV_SECRETS_KEY = pytest.StashKey[frozenset[str]]()
