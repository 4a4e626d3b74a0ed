"""The project of the equivalence session (tests/plugin/test_xdist_reports.py): one project that
takes every path a report has, run once serially and once with ``-n 2``.

Its cases pass, fail, fail a threshold, miss a cassette, miss a fixture (a setup error), are invalid
(a located setup error), are deselected by ``--connic-filter``, call an ``api:`` tool named by
``--connic-api-spec``, read an env file's secrets (tool, builder, mock, model hook) and leak them in
every form, return an 8 MiB output; the agents carry Connic's load warnings (a misspelt key, a
schema that does not load, middleware that does not parse, an unnamed ``api:`` spec) and one
warning that only running meets (middleware that fails to import); a Python test leaks too.

A feature that adds a path to a report adds it here, not a ``-n 2`` session of its own. The texts a
feature's own test module shares with this project live here (the keeper of test_env.py, the
billing API and desk of test_api_tools.py, the agent with typos of test_load_warnings.py).
"""

from __future__ import annotations

import json
from typing import Any

from helpers.leaks import LEAK_TOOL, PLAIN_LEAK_TEST
from helpers.mixed import answer, tool_turn, write_mixed
from helpers.project import ConnicProject

#: from the env file (``--connic-env staging``): non-ASCII, 18 characters (the keeper's checks count them)
TOKEN = "tök€n-Ünïcødé-9f3a"
#: from the env file too: a name that is no secret's, masked because the env file holds it
ENV_NAME = "staging-name-value"
#: from os.environ, by their names: multi-line, and quotes with a backslash
PEM = ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n"
       "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----")
PASSWORD = "q\"u'o\\te-pass-77"
SECRETS = (TOKEN, ENV_NAME, PEM, PASSWORD)
#: the environment the test sets for the sessions (their workers inherit it)
ENVIRON = {"PRIVATE_KEY": PEM, "DB_PASSWORD": PASSWORD}
ENV_FILE = f'# staging credentials\nexport API_TOKEN="{TOKEN}"\nENV_NAME={ENV_NAME}  # a comment\n'

#: ``--connic-filter``: every case's name holds it but ``invalid``'s (deselected, in both sessions)
FILTER = "s"
HUGE = 8 * 1024 * 1024  # 8 MiB of tool output
#: what the reports hold of the huge output: 64 KiB and this marker, once
CUT = f"… [truncated: {HUGE} characters, {HUGE - 65536} cut]"

#: the keeper's pieces (tests/plugin/test_env.py's project too): a tool, a builder, a mock and a
#: model hook that read the env file's values
ENV_TOOL = '''
import os


def secret_of(name: str) -> dict:
    """Read an environment variable."""
    value = os.environ.get(name, "<unset>")
    return {"value": value, "length": len(value)}
'''
LEAK_AGENT_TOOL = LEAK_TOOL + '''

def leak_payload(payload: dict) -> dict:
    """A tool agent's body: ``leak``."""
    return leak(1)
'''
HUGE_TOOL = f'''
def big(payload: dict) -> dict:
    """A tool agent's body: a huge output whose end only the checks can see."""
    return {{"text": "x" * ({HUGE} - 3) + "end", "size": {HUGE}}}
'''
KEEPER_SUITE = """
tests:
  - name: tool sees env
    payload: read it
    expected_tool_calls:
      - secret_of: result.length == 18
  - name: builder and mock see env
    builder: env_payload
    mocks: env_mocks
    expected_tool_calls:
      - secret_of: result.length == 18 and result.mocked and context.length == 18
    expected_result: output == "something else"
  - name: hook sees env
    payload: hello
    expected_result: output == "len=18"
"""
BUILDER = '''
import os


def build(context, builder_args, test_name, payload, files):
    context["length"] = len(os.environ.get("API_TOKEN", ""))
    return {"token": os.environ.get("API_TOKEN"), "name": os.environ.get("ENV_NAME")}
'''
MOCKS = '''
import os


def mock_envtool_secret_of(tool_name, params, context):
    value = os.environ.get(params["name"], "<unset>")
    return {"value": value, "length": len(value), "mocked": True}
'''
CONFTEST = '''
import os


def pytest_connic_make_model(config, agent, model, case, run_index):
    if case and case["name"] == "hook sees env":
        return lambda request: "len=" + str(len(os.environ.get("API_TOKEN", "")))
'''
HUGE_SUITE = f"""
agent: huge
tests:
  - name: sees the whole value
    payload: go
    expected_result: 'output.text[{HUGE - 3}:] == "end" and output.size == {HUGE}'
  - name: fails on the whole value
    payload: go
    expected_result: 'output.text[{HUGE - 3}:] == "END"'
"""
#: five cases, more than any other suite: xdist's ``loadfile`` gives the largest files to the
#: workers first, so this suite and ``calc.yaml`` start on different workers
THRESHOLD_SUITE = """
agent: calc
tests:
  - name: threshold passes
    payload: hi
    runs: 4
    success_threshold: 75
    expected_result: output.ok == true
  - name: threshold fails
    payload: hi
    runs: 4
    success_threshold: 75
    expected_result: output.ok == true
  - name: missing cassettes
    payload: hi
  - name: multiplies as well
    payload: 6 times 7
    expected_tool_calls: [multiply]
    expected_result: output.product == 42
  - name: invalid expressions
    payload: hi
    expected_result: outptu.x == 1
"""
#: the cases that call ``calc.multiply``, and the one that calls ``calc.add``
MULTIPLYING = ("tests/b_multiply.yaml::multiplies", "tests/threshold.yaml::multiplies as well")
ADDING = "tests/calc.yaml::adds"
def agent_with_typos(name: str) -> str:
    """An agent file with misspelt keys (``max_iteration`` at 6:1, ``retry_options.max_dely`` at
    9:3, ``colour`` at 11:1) and a local extension (``x-owner``): tests/plugin/test_load_warnings.py's too."""
    return f'''
version: "1.0"
name: {name}
description: the {name} agent
type: tool
tool_name: calc.echo
max_iteration: 3
retry_options:
  attempts: 2
  max_dely: 3
x-owner: the docs team
colour: blue
'''
BROKEN_IMPORT = '''
import not_installed_anywhere


def before(content, context):
    context["seen"] = True
    return content
'''
#: the billing API (tests/plugin/test_api_tools.py's too)
BILLING_SPEC = """
openapi: 3.0.3
info: {title: Billing, version: "1.0"}
servers:
  - url: https://billing.example.invalid/v1
paths:
  /v1/invoices/{id}:
    get:
      operationId: getInvoice
      summary: One invoice by id
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
      responses: {"200": {description: the invoice}}
  /v1/invoices:
    post:
      operationId: createInvoice
      summary: Create an invoice
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: "#/components/schemas/Invoice"}
      responses: {"201": {description: created}}
  /v1/customers:
    get:
      summary: Every customer
      parameters:
        - {name: limit, in: query, schema: {type: integer}}
      responses: {"200": {description: the customers}}
components:
  schemas:
    Invoice:
      type: object
      properties: {amount: {type: integer}}
"""
#: the desk's tool hooks and suite (tests/plugin/test_api_tools.py's too)
DESK_HOOKS = '''
def before(tool_name, params, context):
    return None


def after(tool_name, params, result, context):
    return {**result, "hooked": tool_name}
'''
DESK_SUITE = """
tests:
  - name: looks up
    payload: "invoice inv_1?"
    expected_tool_calls:
      - invoice_get: params.id == 'inv_1'
    expected_result: output.amount == 120 and output.hooked == 'invoice_get'
"""
#: Connic's load warnings, each to be shown exactly once (the paths are relative to the project)
LOAD_WARNINGS = (
    ("agents/typos.yaml:6:1: max_iteration: unknown agent key 'max_iteration'; did you mean 'max_iterations'? "
     "Connic's loader ignores unknown keys, so this setting has no effect, on Connic as here (prefix local "
     "extensions with 'x-')"),
    "retry_options.max_dely: unknown agent key 'max_dely'; did you mean 'max_delay'?",
    "agents/typos.yaml:11:1: colour: unknown agent key 'colour', not a setting of Connic's agent configuration",
    ("agents/loose.yaml: output_schema 'nowhere' of agent 'loose' could not be loaded (schemas/nowhere.json: the "
     "file does not exist); Connic's loader skips it, so the agent's output is not validated, here as on Connic"),
    ("agents/schemaless.yaml: output_schema is only supported for LLM agents; Connic's loader ignores it for agent "
     "'schemaless' (type: tool), here as on Connic"),
    ("middleware/typos.py: the middleware of agent 'typos' failed to load: invalid syntax (typos.py, line 2); "
     "Connic's loader (connic lint, connic deploy) only warns about it and the agent runs WITHOUT its middleware "
     "(before/after/cleanup), here as on Connic"),
    "agents/desk.yaml: tools entry 'api:crm.contacts_get' ",
)
#: the warning only a run meets: each worker that runs a case of ``calc`` meets it
RUN_WARNING = ("middleware/calc.py: the middleware of agent 'calc' failed to load: No module named "
               "'not_installed_anywhere'; Connic's loader (connic lint, connic deploy) only warns about it and "
               "the agent runs WITHOUT its middleware")


def _answers(*oks: bool) -> list[dict[str, Any]]:
    return [{"turns": [{"content": json.dumps({"ok": ok, "n": i})}]} for i, ok in enumerate(oks)]


#: a hand-written ``--connic-json`` report to compare with (``--connic-compare before.json``)
BEFORE = {"cases": [{
    "nodeid": "tests/calc.yaml::adds", "agent_name": "calc", "test_name": "adds", "status": "failed",
    "successes": 0, "agent_run_ids": ["r1"], "tokens": {"input": 10, "output": 2},
    "runs_detail": [{"output": "an older answer", "tool_calls": []}],
}]}


def write_keeper(project: ConnicProject, env_file: str) -> None:
    """The agent ``keeper``, whose tool, builder, mock and model hook read ``.env.staging``
    (``env_file``), and its suite (``KEEPER_SUITE``) with its cassettes."""
    project.tool("envtool", ENV_TOOL)
    project.agent("keeper", tools=["envtool.secret_of"])
    project.suite("keeper", KEEPER_SUITE)
    project.write("tests/builders/env_payload.py", BUILDER)
    project.write("tests/mocks/env_mocks.py", MOCKS)
    project.write("conftest.py", CONFTEST)
    project.write(".env.staging", env_file)
    turns = [{"tool_calls": [{"name": "secret_of", "arguments": {"name": "API_TOKEN"}}]}, {"content": "done"}]
    for case in ("tool sees env", "builder and mock see env"):
        project.cassette("keeper", case, [{"turns": turns}])


def write_equivalence(calc: ConnicProject) -> ConnicProject:
    """The mixed project (``helpers/mixed.py``) and every other report path, as described above."""
    write_mixed(calc)
    calc.write("middleware/calc.py", BROKEN_IMPORT)
    calc.suite("threshold", THRESHOLD_SUITE)
    calc.cassette("threshold", "threshold passes", _answers(True, True, False, True))
    calc.cassette("threshold", "threshold fails", _answers(True, False, False, True))
    calc.cassette("threshold", "multiplies as well", [{"turns": [tool_turn("multiply", a=6, b=7),
                                                                  answer('{"product": 42}', (50, 5))]}])
    # secrets: an env file read by a tool, a builder, a mock and a model hook; leaked in every form
    write_keeper(calc, ENV_FILE)
    calc.tool("leaky", LEAK_AGENT_TOOL)
    calc.agent("leaky", type="tool", tool_name="leaky.leak_payload")
    calc.suite("leaky", "tests:\n  - name: leaks secrets\n    payload: '{}'\n    expected_result: output == 'never'\n")
    calc.write("tests/test_plain.py", PLAIN_LEAK_TEST)
    # a huge output
    calc.tool("bigtool", HUGE_TOOL)
    calc.agent("huge", type="tool", tool_name="bigtool.big")
    calc.suite("huge", HUGE_SUITE)
    # load warnings
    calc.write("agents/typos.yaml", agent_with_typos("typos"))
    calc.write("middleware/typos.py", "def before(content, context):\n    return content +\n")
    calc.agent("loose", output_schema="nowhere")
    calc.agent("schemaless", type="tool", tool_name="calc.echo", output_schema="nowhere")
    # an api: tool from a spec named by --connic-api-spec, and a ref to a spec named nowhere
    calc.write("billing-spec.yaml", BILLING_SPEC)
    calc.agent("desk", tools=["api:billing.invoice_get", "api:crm.contacts_get"])
    calc.write("hooks/desk.py", DESK_HOOKS)
    calc.suite("desk", DESK_SUITE)
    calc.cassette("desk", "looks up", [{
        "turns": [{"tool_calls": [{"name": "invoice_get", "arguments": {"id": "inv_1"}}]},
                  {"content": '{"amount": 120, "hooked": "invoice_get"}'}],
        "calls": [{"kind": "api", "name": "billing.invoice_get", "result": {"amount": 120}}],
    }])
    calc.write("before.json", json.dumps(BEFORE))
    return calc


def equivalence_options(out: str) -> list[str]:
    """Every report and every option the session takes, its outputs under the folder ``out``."""
    return [
        "--connic-env", "staging", "--connic-filter", FILTER, "--connic-api-spec", "billing=billing-spec.yaml",
        "--connic-compare", "before.json", "-W", "always", "-rA", "-o", "junit_logging=all",
        "--connic-json", f"{out}/report.json", "--junitxml", f"{out}/junit.xml", "--connic-html", f"{out}/report.html",
        "--connic-traces", f"{out}/traces", "--connic-coverage-json", f"{out}/coverage.json",
        "--connic-history", f"{out}/history.sqlite", "--connic-summary", f"{out}/summary.md",
    ]
