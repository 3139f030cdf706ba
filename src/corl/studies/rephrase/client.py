"""The OpenAI-compatible backend: the official `openai` SDK, its failures turned into corl's messages."""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed

import openai

from corl.studies.rephrase.prompts import Messages, Outcome, Rewriter, clean_rewrite


class RequestFailed(Exception):
    """One row's request failed for good (after retries, or with a status not worth retrying)."""


class FatalRequestError(Exception):
    """A failure every row would hit (bad key, unknown model or URL): the run stops."""


# Statuses that every later request would get too; the hint says what to fix.
FATAL_STATUSES = {401: "check the API key", 403: "check the API key's permissions", 404: "check --base-url and --model"}


class _PacedOpenAI(openai.OpenAI):
    """The SDK's client, waiting between retries as --retry-base-delay and --retry-max-delay say.

    The SDK decides what to retry and parses Retry-After; only its waits (0.5 s doubling to
    8 s, Retry-After up to 2 min) have no public setting, so this overrides the one hook
    that computes them. The SDK still gives up at once on a Retry-After over 2 minutes.
    """

    def __init__(self, *, base_delay: float, max_delay: float, **kwargs):
        super().__init__(**kwargs)
        self.base_delay, self.max_delay = base_delay, max_delay

    def _calculate_retry_timeout(self, remaining_retries, options, response_headers=None) -> float:
        retry_after = self._parse_retry_after_header(response_headers)
        if retry_after is not None and math.isfinite(retry_after):
            return min(max(retry_after, 0.0), self.max_delay)
        return self.backoff(options.get_max_retries(self.max_retries) - remaining_retries)

    def backoff(self, retries_taken: int) -> float:
        """Exponential backoff, halved at random so that parallel requests spread out: base*2^n, capped."""
        return min(self.max_delay, self.base_delay * 2.0 ** min(retries_taken, 64)) * random.uniform(0.5, 1.0)


class OpenAIChatClient:
    """Chat completions from `{base_url}/chat/completions`; safe to call from many threads.

    Retried by the SDK, with exponential backoff and jitter and `Retry-After` honoured up to
    `max_delay`: HTTP 408/409/429/5xx, timeouts and connection errors. Retried here, as
    often: a 200 that is not a chat completion (bad JSON, no text), which proxies and
    overloaded servers return and the SDK passes on. Fatal for the whole run: 401/403/404.
    Failed for the row without retry: other 4xx, and a rewrite cut off by `max_tokens`.

    The API key goes only into the Authorization header. Errors are built here from the
    status, the endpoint and a body snippet with the key replaced by ***, and raised outside
    the SDK exception's handler, so no chained exception carries a server's echo of it.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        max_retries: int = 6,
        base_delay: float = 1.0,
        max_delay: float = 60.0,
        temperature: float = 0.7,
        max_tokens: int = 1024,
        extra_body: dict | None = None,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.max_retries = max_retries
        self._api_key = api_key or None
        # All sampling settings go in extra_body so that --extra-body can override any of them
        # or delete one with null (servers that reject max_tokens, say).
        params = {"temperature": temperature, "max_tokens": max_tokens} | (extra_body or {})
        self.params = {k: v for k, v in params.items() if v is not None}
        # With no key the SDK would read OPENAI_API_KEY from the environment and send it to
        # this server, which may be anyone's: give it a placeholder and drop the header.
        self._headers = {} if self._api_key else {"Authorization": openai.omit}
        self._sdk = _PacedOpenAI(
            base_url=base_url, api_key=self._api_key or "unused", max_retries=max_retries, timeout=timeout,
            base_delay=base_delay, max_delay=max_delay,
        )  # fmt: skip

    def __repr__(self) -> str:
        return f"OpenAIChatClient(url={self.url!r}, model={self.model!r})"

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, "***") if self._api_key else text

    def complete(self, messages: Messages) -> str:
        """The model's answer to `messages`, cleaned; RequestFailed or FatalRequestError if none."""
        last_error = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self._sdk.backoff(attempt - 1))
            failure: Exception | None = None
            try:
                completion = self._sdk.chat.completions.create(
                    model=self.model, messages=messages, extra_body=self.params, extra_headers=self._headers
                )
            except (json.JSONDecodeError, openai.APIResponseValidationError) as err:
                last_error = f"malformed response from {self.url} ({type(err).__name__})"
                continue
            except openai.OpenAIError as err:
                failure = self._failure(err)
            if failure is not None:
                raise failure  # outside the except block: the SDK's exception is not chained
            try:
                choice = completion.choices[0]
                content, finish = choice.message.content, choice.finish_reason
            except (AttributeError, IndexError, TypeError):  # a JSON body that is no completion, or text
                last_error = f"malformed response from {self.url}: {self._scrub(str(completion)[:120])!r}"
                continue
            if finish == "length":
                raise RequestFailed("the rewrite was cut off by the token limit; raise --max-tokens")
            text = clean_rewrite(content) if isinstance(content, str) else ""
            if text:
                return text
            last_error = f"malformed response from {self.url}: no text (finish_reason {finish!r})"
        raise RequestFailed(f"gave up after {self.max_retries + 1} attempts; last error: {last_error}")

    def _failure(self, err: openai.OpenAIError) -> Exception:
        """corl's error for an SDK error, naming the endpoint and never the key."""
        retried = f"gave up after {self.max_retries + 1} attempts; last error"
        if isinstance(err, openai.APIStatusError):
            status, snippet = err.status_code, self._scrub(err.response.text[:200])
            if status in FATAL_STATUSES:
                return FatalRequestError(f"HTTP {status} from {self.url} ({FATAL_STATUSES[status]}): {snippet}")
            if status in (408, 409, 429) or status >= 500:  # the ones the SDK retries
                return RequestFailed(f"{retried}: HTTP {status}: {snippet}")
            return RequestFailed(f"HTTP {status}: {snippet}")
        if isinstance(err, openai.APITimeoutError):
            return RequestFailed(f"{retried}: no answer from {self.url} within the timeout (raise --timeout)")
        if isinstance(err, openai.APIConnectionError):
            cause = self._scrub(str(err.__cause__ or err))
            return RequestFailed(f"{retried}: cannot connect to {self.url} ({cause})")
        return RequestFailed(f"{type(err).__name__}: {self._scrub(str(err))}")


def http_rewriter(client: OpenAIChatClient, concurrency: int = 8) -> Rewriter:
    """Rewrites through an OpenAI-compatible endpoint, `concurrency` requests at a time."""

    def run(jobs: list[Messages]) -> Iterator[Outcome]:
        pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="rephrase")
        try:
            futures = {pool.submit(client.complete, messages): i for i, messages in enumerate(jobs)}
            for future in as_completed(futures):
                try:
                    yield futures[future], future.result(), None
                except RequestFailed as err:
                    yield futures[future], None, str(err)
        finally:
            # Queued requests are cancelled. Requests in flight run to their end (the SDK's
            # retry waits cannot be interrupted) and their answers are dropped.
            pool.shutdown(wait=False, cancel_futures=True)

    return run
