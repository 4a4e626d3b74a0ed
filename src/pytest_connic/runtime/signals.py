"""The exceptions that end a run (or one call of user code) their own way."""

from __future__ import annotations

from pytest_connic.errors import ConnicError, RunSignal
from pytest_connic.project.sdk import StopProcessing
from pytest_connic.usertb import TracebackData


class RunAborted(RunSignal):
    """Ends the run at once and fails it with ``message`` as a check failure
    (strict mocks, a mocked call that misses the signature, a cassette problem)."""

    def __init__(self, message: str, *, traceback: TracebackData | None = None) -> None:
        super().__init__(message)
        self.message = message
        #: the user's traceback when user code's exception aborted the run (``usertb.for_record``)
        self.traceback = traceback


class RunFailed(RunSignal):
    """Ends the run with status ``failed`` and ``message`` as its error; with ``keep_output``
    the run keeps the output it has (a guardrail's ``fail_run`` changes the status only)."""

    def __init__(self, message: str, *, keep_output: bool = False,
                 traceback: TracebackData | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.keep_output = keep_output
        #: the user's traceback when user code's exception ended the run (``usertb.for_record``)
        self.traceback = traceback


class AwaitingApproval(RunSignal):
    """A gated call has no scripted decision: the run ends ``awaiting_approval``."""


class InfrastructureFailure(RunSignal):
    """A provider failed: the case is an error, the session exits 2."""


#: what passes through user code, hooks and tool dispatch untouched, to end the run its own way:
#: every ``RunSignal`` (``RunAborted``, ``RunFailed``, ``AwaitingApproval``,
#: ``InfrastructureFailure``, and the models' ``CassetteError`` and ``ProviderError``) and the
#: SDK's ``StopProcessing``, which cannot derive from a class of ours
PASS_THROUGH: tuple[type[BaseException], ...] = (StopProcessing, RunSignal)


class ExitCalled(ConnicError):
    """User code called ``sys.exit()``: it ends that call (a failing tool, hook, builder, ...),
    never the run's event loop or the pytest session."""

    def __init__(self, code: object) -> None:  # ``SystemExit.code``: None, an int, or any object
        super().__init__(f"sys.exit({code!r}) was called")
        self.code = code


class UserCodeEnded(RunFailed):
    """User code ended its run, not with an ordinary exception: its worker process died (an exit,
    a signal, memory past the limit), it raised a ``BaseException`` (``KeyboardInterrupt``,
    ``GeneratorExit``, ...), or its call could not cross to or from the worker. The run fails with
    ``message``; the session and the other runs go on."""
