"""One claimed head's life in a worker: run the handler, then complete, fail, or let it go."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from ..backoff import Backoff
from ..contract.limits import DEFAULT_LIMITS
from ..errors import A2Error
from ..models import Completed, Completion, Head, NewEvent, Superseded
from ..store import Store
from .app import App, Registration, completion_events
from .batch import SEND_RETRY_BASE, CompletionBatcher, PendingCompletion
from .health import StoreHealth
from .hooks import Outcome, WorkerHooks

log = logging.getLogger("a2pg.worker")

Stage = Literal["running", "queued", "settling", "released"]


@dataclass(slots=True)
class WorkerStats:
    """Counters for demos, benchmarks and health checks.

    ``failed`` counts failures that will be retried; ``dead_lettered`` heads this
    worker dead-lettered (by a failure, or by claiming a head whose lapsed leases
    reached ``max_failures``); ``released`` attempts cut short by a shutdown and handed
    back with ``release_claims`` (no failure counted).
    """

    claimed: int = 0
    completed: int = 0
    failed: int = 0
    dead_lettered: int = 0
    superseded: int = 0
    released: int = 0
    flushes: int = 0
    store_errors: int = 0


@dataclass(eq=False, slots=True)
class Attempt:
    """An attempt in flight: its head, where it is, and how to stop it."""

    head: Head
    registration: Registration
    leased_at: float
    claimed_at: float = 0.0
    stage: Stage = "running"
    outcome: Outcome | None = None
    """How it ended (see ``hooks.Outcome``); None while it runs."""
    error: BaseException | None = None
    """What failed it, when it failed."""
    handler: asyncio.Future[Any] | None = None
    entry: PendingCompletion | None = None
    superseded: bool = False
    releasing: bool = False
    task: asyncio.Task[None] | None = None

    @property
    def key(self) -> tuple[object, ...]:
        return (self.head.session_id, self.head.attempt_ref)

    def describe(self) -> str:
        h = self.head
        lane = "" if h.lane is None else f"/{h.lane}"
        return f"{h.session_id}:{h.consumer}{lane}@{h.index}#{h.attempt}"

    def elapsed(self) -> float:
        """Seconds since it was claimed (by the event loop's clock)."""
        return asyncio.get_running_loop().time() - self.claimed_at


class AttemptRunner:
    """Runs handlers and settles their attempts with the store.

    An attempt ends exactly one way: completed (its returned events appended by a
    batched ``complete_attempts``), failed (``fail_attempt`` with a backoff; it may
    dead-letter), superseded (the store no longer knows this attempt: its result is
    dropped), or released (shutdown cut it short: its stage becomes ``released`` and the
    worker hands the claim back with ``release_claims``, so another worker takes it at
    once and no failure is counted). The store failing on the way (a lost connection)
    does not end the attempt: its completion or failure is sent again until the store
    answers, its lease renewed meanwhile; only a shutdown gives up on it (the lease then
    lapses, and the next claim counts a failure).
    """

    def __init__(
        self,
        store: Store,
        app: App,
        batcher: CompletionBatcher,
        *,
        holder: str,
        max_failures: int,
        backoff: Backoff,
        concurrency: int,
        stats: WorkerStats,
        on_retry: Callable[[float], None],
        on_handler_done: Callable[[], None],
        health: StoreHealth | None = None,
        hooks: WorkerHooks | None = None,
    ) -> None:
        self.store = store
        self._health = health or StoreHealth(1.0)
        self._hooks = hooks or WorkerHooks()
        self._app = app
        self.batcher = batcher
        self.holder = holder
        self.max_failures = max_failures
        self.backoff = backoff
        self.stats = stats
        self._concurrency = concurrency
        self._on_retry = on_retry
        self._on_handler_done = on_handler_done
        self._running_handlers = 0
        self._executor: ThreadPoolExecutor | None = None

    def begin(self, head: Head, *, on_done: Callable[[Attempt], None]) -> Attempt | None:
        """Starts a claimed head's attempt; a head the claim dead-lettered is only counted."""
        if head.dead_lettered:
            self.stats.dead_lettered += 1
            self._hooks.dead_lettered_on_claim(head)
            log.warning("%s:%s@%d dead-lettered (leases lapsed)", *_where(head))
            return None
        registration = self._registration(head)
        if registration is None:
            return None
        self.stats.claimed += 1
        now = asyncio.get_running_loop().time()
        attempt = Attempt(head, registration, leased_at=now, claimed_at=now)
        self._running_handlers += 1  # counted now: the claimer reads it before the task starts

        async def run() -> None:
            try:
                with self._hooks.attempt(attempt):  # the handler runs inside (tracing spans)
                    try:
                        await self._run(attempt)
                    except Exception as error:
                        self.stats.store_errors += 1
                        attempt.outcome, attempt.error = "abandoned", error
                        log.exception(
                            "attempt %s ended in error; its lease will lapse", attempt.describe()
                        )
            finally:
                on_done(attempt)

        attempt.task = asyncio.create_task(run(), name=f"a2pg-attempt {attempt.describe()}")
        return attempt

    def supersede(self, attempt: Attempt) -> None:
        """The store says this attempt is stale: stop its handler or withdraw its completion."""
        if attempt.superseded:
            return
        if attempt.stage == "running":
            attempt.superseded = True
            if attempt.handler is not None:
                attempt.handler.cancel()
        elif (
            attempt.stage == "queued"
            and attempt.entry is not None
            and self.batcher.withdraw(attempt.entry)
        ):
            attempt.superseded = True
            attempt.entry.future.set_result(Superseded())
        # already sent or failing: the store's answer to that call decides

    def release(self, attempt: Attempt) -> None:
        """Shutdown: cut a running handler short; the worker then hands its claim back."""
        if attempt.stage == "running" and not attempt.superseded:
            attempt.releasing = True
            if attempt.handler is not None:
                attempt.handler.cancel()

    @property
    def running(self) -> int:
        """Handlers running now (claimed attempts whose handler has not returned)."""
        return self._running_handlers

    def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:  # threads still running a cut-short sync handler finish alone
            executor.shutdown(wait=False, cancel_futures=True)

    def _registration(self, head: Head) -> Registration | None:
        registration = self._app.registration(head.consumer)
        if registration is None:  # claim_any was told our consumers: a store bug
            log.error("claimed %s:%s@%d, a consumer this app does not serve", *_where(head))
        return registration

    # ------------------------------------------------------------------ the run

    async def _run(self, attempt: Attempt) -> None:
        head = attempt.head
        try:
            attempt.handler = asyncio.ensure_future(self._invoke(attempt))
            if attempt.releasing:  # cut short before it started: the handler never runs
                attempt.handler.cancel()
            try:
                result = await attempt.handler
            finally:
                self._running_handlers -= 1
                if self._running_handlers == 0:
                    self.batcher.flush_now()  # nothing else could join the batch
                self._on_handler_done()
        except asyncio.CancelledError as error:
            if _being_cancelled():
                raise
            if attempt.superseded:
                self.stats.superseded += 1
                attempt.outcome = "superseded"
                log.info("%s superseded; its handler was cancelled", attempt.describe())
            elif attempt.releasing:
                attempt.stage = "released"
                attempt.outcome = "released"
                log.info("%s cut short by the shutdown; to be released", attempt.describe())
            else:  # the handler raised CancelledError itself: a failure like any other
                await self._fail(attempt, error, describe_error(error))
            return
        except Exception as error:
            await self._fail(attempt, error, describe_error(error))
            return
        if attempt.superseded:  # the renewal said so while the result was on its way
            self.stats.superseded += 1
            attempt.outcome = "superseded"
            return
        try:  # bad events are the store's to judge: a refused batch is re-sent one by one
            events = completion_events(head, result)
        except Exception as error:
            await self._fail(attempt, error, describe_error(error))
            return
        await self._complete(attempt, events)

    async def _invoke(self, attempt: Attempt) -> Any:
        registration, head = attempt.registration, attempt.head
        if registration.is_async:
            result: Any = registration.handler(head)
        else:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self._concurrency, thread_name_prefix="a2pg-handler"
                )
            call = functools.partial(contextvars.copy_context().run, registration.handler, head)
            result = await asyncio.get_running_loop().run_in_executor(self._executor, call)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _complete(self, attempt: Attempt, events: list[NewEvent]) -> None:
        head = attempt.head
        attempt.stage = "queued"
        attempt.entry = self.batcher.enqueue(
            Completion(head.session_id, head.consumer, head.lane, head.index, head.attempt, events)
        )
        if self._running_handlers == 0:
            self.batcher.flush_now()
        try:
            outcome = await attempt.entry.future
        except asyncio.CancelledError:
            if _being_cancelled():
                raise
            attempt.outcome = "abandoned"
            log.warning("%s: completion not sent before shutdown", attempt.describe())
            return
        except A2Error as error:  # refused on its own: e.g. returned ids clash with stored events
            await self._fail(attempt, error, f"completion refused: {error}")
            return
        except Exception as error:
            self.stats.store_errors += 1
            attempt.outcome, attempt.error = "abandoned", error
            log.error("%s: completion not acknowledged (%r)", attempt.describe(), error)
            return
        if isinstance(outcome, Completed):
            self.stats.completed += 1
            attempt.outcome = "completed"
        else:
            self.stats.superseded += 1
            attempt.outcome = "superseded"
            log.info("%s superseded; its result was discarded", attempt.describe())

    async def _fail(self, attempt: Attempt, error: BaseException, text: str) -> None:
        head = attempt.head
        attempt.stage = "settling"
        attempt.error = error
        retry_after = self.backoff.delay(head.failure_count + 1)
        delay = SEND_RETRY_BASE
        while True:  # the same call again is idempotent: repeat it until the store answers
            try:
                async with self._health.call("fail_attempt"):
                    result = await self.store.fail_attempt(
                        head.session_id,
                        consumer=head.consumer,
                        lane=head.lane,
                        index=head.index,
                        attempt=head.attempt,
                        error=text,
                        max_failures=self.max_failures,
                        retry_after=retry_after,
                    )
                break
            except A2Error:
                raise
            except Exception as lost:
                log.info("%s: recording the failure failed (%r); again", attempt.describe(), lost)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._health.every)
        attempt.outcome = result.outcome
        if result.outcome == "failed":
            self.stats.failed += 1
            self._on_retry(retry_after)
            log.warning(
                "%s failed (%d of %d), retry in %.2fs: %r",
                attempt.describe(),
                result.failure_count,
                self.max_failures,
                retry_after,
                error,
                exc_info=error,
            )
        elif result.outcome == "dead_lettered":
            self.stats.dead_lettered += 1
            log.error(
                "%s dead-lettered after %d failures", attempt.describe(), result.failure_count
            )
        else:
            self.stats.superseded += 1


def describe_error(error: BaseException, limit: int = DEFAULT_LIMITS.max_error_length) -> str:
    """The traceback as error text; when too long, its end (where the error is) is kept."""
    text = "".join(traceback.format_exception(error))
    if len(text) <= limit:
        return text
    return "...\n" + text[-(limit - 4) :]


def _being_cancelled() -> bool:
    """Whether the current task itself is being cancelled (not just something it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _where(head: Head) -> tuple[str, str, int]:
    return head.session_id, head.consumer, head.index
