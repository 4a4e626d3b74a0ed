"""What a model turn cost: the price of its model per million input and output tokens.

A turn's cost is the one its provider reported (a live call, or a cassette turn's ``cost``);
else the model's price from ``connic_model_prices`` (``MODEL = IN/OUT``, US dollars per million
input / output tokens: aliases, local and unknown models); else LiteLLM's price map, for the
models LiteLLM knows (``openai/gpt-4.1-mini``); else unknown (``None``: the reports say ``—``,
never ``$0.0000``). A ``--connic-model-alias`` target is priced when its alias is not.

LiteLLM's map is the JSON file LiteLLM bundles (what ``litellm.model_cost`` is loaded from),
read without importing LiteLLM (seconds) and never fetched; without the ``[live]`` extra there
is no map, and only ``connic_model_prices`` prices turns.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_connic.records.run import RunRecord

#: the file LiteLLM loads ``model_cost`` from when it stays offline
MAP_FILE = "model_prices_and_context_window_backup.json"


def parse_price(text: str) -> tuple[float, float] | None:
    """``"0.4/1.6"`` as ``(0.4, 1.6)``; None when it is not two non-negative numbers."""
    left, sep, right = text.partition("/")
    try:
        prices = (float(left), float(right))
    except ValueError:
        return None
    if not sep or not all(0 <= p < float("inf") for p in prices):
        return None
    return prices


@functools.lru_cache(maxsize=1)
def litellm_map() -> Mapping[str, object]:
    """LiteLLM's bundled price map (empty without LiteLLM or when it cannot be read)."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / MAP_FILE
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _map_price(model: str) -> tuple[float, float] | None:
    """A model's price per million tokens from LiteLLM's map (with or without its provider)."""
    table = litellm_map()
    for key in (model, model.split("/", 1)[-1]):
        entry = table.get(key)
        if isinstance(entry, dict):
            given = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
            if all(isinstance(p, (int, float)) for p in given):
                return given[0] * 1e6, given[1] * 1e6  # type: ignore[operator]
    return None


@dataclass(frozen=True)
class Prices:
    """``connic_model_prices`` (model -> dollars per million input/output tokens) and the model
    aliases, over LiteLLM's map."""

    table: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)

    def price(self, model: str | None) -> tuple[float, float] | None:
        """``model``'s price per million input and output tokens; None when none is known."""
        if not model:
            return None
        for name in (model, self.aliases.get(model)):
            if name and name in self.table:
                return self.table[name]
        for name in (model, self.aliases.get(model)):
            found = _map_price(name) if name else None
            if found is not None:
                return found
        return None

    def cost(self, model: str | None, input_tokens: int, output_tokens: int) -> float | None:
        """What a turn of ``model`` with these tokens cost in US dollars; None when unknown."""
        price = self.price(model)
        if price is None:
            return None
        return (price[0] * input_tokens + price[1] * output_tokens) / 1e6

    def price_run(self, record: RunRecord) -> None:
        """Give every turn of ``record`` (and of its child runs) without a reported cost its
        priced cost, where a price is known."""
        for turn in record.model_turns:
            if turn.cost is None:
                turn.cost = self.cost(turn.model, turn.input_tokens, turn.output_tokens)
        for trigger in record.triggers:
            if trigger.child_run is not None:
                self.price_run(trigger.child_run)


def format_cost(cost: float | None) -> str:
    """``$0.0012``, ``$0.000042`` for a tiny one, ``$0`` for nothing spent, ``—`` when unknown."""
    if cost is None:
        return "—"
    if cost == 0:
        return "$0"
    return f"${cost:.4f}" if cost >= 0.0001 else f"${cost:.6f}"
