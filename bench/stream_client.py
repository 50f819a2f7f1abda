"""A headless Streamlit client: one browser session spoken over Streamlit's own
websocket protocol (`ws://HOST:PORT/_stcore/stream`, binary protobufs from the
installed streamlit package), with nothing rendered.

The browser's side of the protocol, as far as a session that opens a link and
presses a button needs it:
- it connects with the subprotocol `streamlit` and sends a `BackMsg.rerun_script`
  whose `ClientState` carries the URL's query string (and, later, the page's hash);
- the server answers each script run with a `new_session` message, `delta`s (one
  element or block each: a button's `id` is its widget id), `page_info_changed` when
  the script sets query parameters, and `script_finished` with the run's status;
- a button click is another `rerun_script` whose widget states hold that button's id
  with `trigger_value = True`. Widgets the client does not send keep their values:
  the server remembers them from the previous run.

`RunView` reads ForwardMsgs and holds what a load test needs (pure, unit-tested);
`Session` drives one connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from streamlit.proto.Alert_pb2 import Alert
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

# Explore's Overview shows this metric first, only once a report with a jaxpr arrived:
# the result is on the page (the first chart follows in the same run)
RESULT_MARKER = "jaxpr equations"
ANALYZE = "Analyze"
# a run that ended on its own (not stopped for a rerun): the page is complete
COMPLETE = (
    ForwardMsg.ScriptFinishedStatus.FINISHED_SUCCESSFULLY,
    ForwardMsg.ScriptFinishedStatus.FINISHED_WITH_COMPILE_ERROR,
)


def elements(msg: ForwardMsg) -> Iterator[Element]:
    """The elements one ForwardMsg adds: a delta's new element, or a transient's
    (toasts and spinners arrive as `new_transient`)."""
    if msg.WhichOneof("type") != "delta":
        return
    kind = msg.delta.WhichOneof("type")
    if kind == "new_element":
        yield msg.delta.new_element
    elif kind == "new_transient":
        yield from msg.delta.new_transient.elements


@dataclass
class RunView:
    """What the server has sent so far, read without rendering anything."""

    buttons: dict[str, str] = field(default_factory=dict)  # label -> widget id, latest run
    result_at: float | None = None  # when the result marker first arrived
    exceptions: list[str] = field(default_factory=list)  # st.exception elements
    error_cards: list[str] = field(default_factory=list)  # st.error alerts (error cards)
    page_hash: str = ""  # the page the navigation ran, for the next rerun
    query_string: str = ""  # the URL's query string as the script last set it
    runs_complete: int = 0  # script runs that ended on their own

    def read(self, msg: ForwardMsg, now: float) -> None:
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.buttons = {}  # a new run draws its widgets again
        elif kind == "navigation":
            self.page_hash = msg.navigation.page_script_hash
        elif kind == "page_info_changed":
            self.query_string = msg.page_info_changed.query_string
        elif kind == "script_finished" and msg.script_finished in COMPLETE:
            self.runs_complete += 1
        for element in elements(msg):
            self._element(element, now)

    def _element(self, element: Element, now: float) -> None:
        kind = element.WhichOneof("type")
        if kind == "button":
            self.buttons[element.button.label] = element.button.id
        elif kind == "metric" and element.metric.label == RESULT_MARKER:
            self.result_at = self.result_at if self.result_at is not None else now
        elif kind == "exception" and not element.exception.is_warning:
            _once(self.exceptions, f"{element.exception.type}: {element.exception.message}")
        elif kind == "alert" and element.alert.format == Alert.Format.ERROR:
            _once(self.error_cards, element.alert.body)


def _once(found: list[str], text: str) -> None:
    """A page drawn again (a rerun) shows the same problem again: it counts once."""
    if text not in found:
        found.append(text)


def trigger(widget_id: str) -> WidgetState:
    """A button press, as the browser sends it: the button's id, triggered once."""
    state = WidgetState(id=widget_id)
    state.trigger_value = True
    return state


def rerun_message(
    query_string: str, page_hash: str = "", widgets: Iterable[WidgetState] = ()
) -> bytes:
    """The BackMsg that asks for a script run: the browser's first message after it
    connects (no page hash: the default page), and each widget interaction."""
    msg = BackMsg()
    state = msg.rerun_script
    state.query_string = query_string
    state.page_script_hash = page_hash
    state.widget_states.widgets.extend(widgets)
    return msg.SerializeToString()


def stream_url(port: int, host: str = "127.0.0.1") -> str:
    return f"ws://{host}:{port}/_stcore/stream"


@dataclass
class Outcome:
    """One session: seconds from connecting to the result (None: it never came), what
    the page showed that went wrong, and whether Analyze had to be pressed."""

    seconds: float | None
    exceptions: list[str]
    error_cards: list[str]
    clicked: bool
    failure: str | None = None  # the client gave up: timeout, disconnect

    @property
    def finished(self) -> bool:
        return self.seconds is not None and self.failure is None


class Session:
    """One headless browser session on Explore: open a link, wait for the page's run,
    press Analyze if the link did not analyze by itself, and wait for the result."""

    def __init__(self, port: int, query_string: str):
        self.url = stream_url(port)
        self.query_string = query_string
        self.view = RunView(query_string=query_string)

    async def result(self, timeout_s: float) -> Outcome:
        import websockets  # a dependency of streamlit itself

        start, clicked = time.perf_counter(), False
        try:
            async with (
                asyncio.timeout(timeout_s),
                websockets.connect(
                    self.url, subprotocols=["streamlit"], max_size=None, open_timeout=60
                ) as ws,
            ):
                await ws.send(rerun_message(self.query_string))
                await self._until_complete(ws, start)
                if self.view.result_at is None and ANALYZE in self.view.buttons:
                    clicked = True  # a link that waits for the click, as a visitor would do
                    await ws.send(self._click(ANALYZE))
                    await self._until_complete(ws, start)
        except (TimeoutError, OSError, websockets.WebSocketException) as exc:
            return self._outcome(clicked, f"{type(exc).__name__}: {exc}")
        return self._outcome(clicked, None if self.view.result_at else "no result")

    def _click(self, label: str) -> bytes:
        widget = trigger(self.view.buttons[label])
        return rerun_message(self.view.query_string, self.view.page_hash, [widget])

    async def _until_complete(self, ws, start: float) -> None:
        """Read messages until a script run ends on its own (a run stopped for a
        rerun is followed by the next one)."""
        done = self.view.runs_complete + 1
        while self.view.runs_complete < done:
            msg = ForwardMsg()
            msg.ParseFromString(await ws.recv())
            self.view.read(msg, time.perf_counter() - start)

    def _outcome(self, clicked: bool, failure: str | None) -> Outcome:
        view = self.view
        return Outcome(view.result_at, view.exceptions, view.error_cards, clicked, failure)
