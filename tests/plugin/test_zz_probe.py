import pytest

SUITE = "tests:\n  - name: one\n    payload: '{\"a\": 1}'\n    expected_result: status == 'completed'\n"

@pytest.mark.parametrize("i", range(4))
def test_inproc_isolated(calc, i):
    calc.suite("echo", "agent: echo\n" + SUITE)
    r = calc.run("-q")
    r.assert_outcomes(passed=1)

@pytest.mark.isolation_none
@pytest.mark.parametrize("i", range(4))
def test_inproc_none(calc, i):
    calc.suite("echo", "agent: echo\n" + SUITE)
    r = calc.run("-q")
    r.assert_outcomes(passed=1)

@pytest.mark.parametrize("i", range(2))
def test_subproc(calc, i):
    calc.suite("echo", "agent: echo\n" + SUITE)
    r = calc.pytester.runpytest_subprocess("-q")
    r.assert_outcomes(passed=1)
