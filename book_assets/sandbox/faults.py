"""Fault injection for the sandbox: what can go wrong, and a pure, seeded decision per request.

Every decision is a function of ``(seed, path, n)`` where ``n`` counts earlier requests for the same path
since the last stats reset. The same sequence of requests therefore meets the same faults on every run,
whatever the timing or interleaving of other paths, which is what makes a flaky-network test repeatable.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from book_assets.sandbox.bomb import BOMB_BYTES
from book_assets.sandbox.bomb import PREFIX as BOMB_PREFIX


class Action(enum.Enum):
    """What the server does with one request."""

    SERVE = "serve"
    NOT_FOUND = "404"
    ERROR_500 = "500"
    ERROR_503 = "503"
    RATE_LIMIT = "429"
    RESET = "reset"
    HANG = "hang"
    TRUNCATE = "truncate"
    NOT_MODIFIED = "304"  # whatever the request asked: what a broken cache in front of a site does
    BOMB = "bomb"  # a 200 of gzip that inflates to ``bomb_bytes`` of HTML (see ``bomb.py``)
    # Soft blocks: a 200 whose body is not the page (see ``softblock.py``).
    SOFT_BLOCK_CHALLENGE = "soft_block_challenge"  # a Cloudflare-style "Attention Required!" block page
    SOFT_BLOCK_LOGIN = "soft_block_login"  # a "Please log in" wall in the site's chrome
    SOFT_BLOCK_EMPTY = "soft_block_empty"  # an empty body
    # A 200 in the site's own template that is no page of the catalogue (see ``pages.render_notice``).
    ERROR_PAGE = "error_page"  # "Something went wrong": a server error the site renders as a 200
    MAINTENANCE = "maintenance"  # "Down for maintenance": the whole site's holding page

    @property
    def is_soft_block(self) -> bool:
        return self in SOFT_BLOCKS


#: The soft blocks, in the order ``soft_block_rate`` draws among them (even odds).
SOFT_BLOCKS: tuple[Action, ...] = (Action.SOFT_BLOCK_CHALLENGE, Action.SOFT_BLOCK_LOGIN, Action.SOFT_BLOCK_EMPTY)


#: Names accepted in scripted failures besides the status codes 500, 503, 429 and 200 ("serve"); "soft_block" is
#: the challenge page, the commonest soft block.
SCRIPT_NAMES: dict[str, Action] = {
    "200": Action.SERVE,
    "serve": Action.SERVE,
    "ok": Action.SERVE,
    "404": Action.NOT_FOUND,
    "500": Action.ERROR_500,
    "503": Action.ERROR_503,
    "429": Action.RATE_LIMIT,
    "reset": Action.RESET,
    "hang": Action.HANG,
    "truncate": Action.TRUNCATE,
    "304": Action.NOT_MODIFIED,
    "bomb": Action.BOMB,
    "soft_block": Action.SOFT_BLOCK_CHALLENGE,
    "challenge": Action.SOFT_BLOCK_CHALLENGE,
    "login": Action.SOFT_BLOCK_LOGIN,
    "empty": Action.SOFT_BLOCK_EMPTY,
    "error_page": Action.ERROR_PAGE,
    "maintenance": Action.MAINTENANCE,
    **{action.value: action for action in SOFT_BLOCKS},
}


def parse_action(value: int | str | Action) -> Action:
    """Turn a scripted step (``503``, ``"reset"``, ``Action.HANG`` ...) into an ``Action``."""
    if isinstance(value, Action):
        return value
    try:
        return SCRIPT_NAMES[str(value).strip().lower()]
    except KeyError:
        allowed = ", ".join(sorted(SCRIPT_NAMES))
        raise ValueError(f"unknown scripted fault {value!r}; use one of: {allowed}") from None


@dataclass(frozen=True)
class Decision:
    action: Action
    delay_s: float = 0.0


@dataclass(frozen=True)
class Faults:
    """Faults for one server run; the default injects nothing.

    Probabilities are per request and apply to site pages only (never to ``/__sandbox__/``); their sum must
    not exceed 1. The bands are drawn in this order from one uniform number: reset, hang, truncate,
    error (500 or 503, even odds), rate limit (429), bomb, soft block (challenge, login wall or empty body,
    even odds).

    Attributes:
        latency_s: fixed delay before every site response.
        jitter_s: extra uniform random delay in ``[0, jitter_s)``.
        error_rate: probability of a 500 or 503 response.
        rate_limit_rate: probability of a 429 response carrying ``Retry-After: retry_after_s``.
        retry_after_s: value of the ``Retry-After`` header (seconds).
        reset_rate: probability of closing the connection with a TCP RST before any response byte.
        hang_rate: probability of holding the request ``hang_s`` seconds, then closing without a response.
        hang_s: how long a hang lasts; make it longer than the client's timeout.
        truncate_rate: probability of a 200 whose body stops after ``truncate_fraction`` of the announced
            ``Content-Length`` and whose connection is then closed.
        truncate_fraction: share of the body sent before closing.
        bomb_rate: probability of a decompression bomb: a 200 with ``Content-Encoding: gzip`` and an honest
            ``Content-Length`` of about 1 MB per GiB, whose body inflates to ``bomb_bytes`` of HTML.
        bomb_bytes: what a bomb inflates to (1 GiB).
        soft_block_rate: probability of a soft block: a 200 whose body is not the page but a bot challenge
            ("Attention Required!"), a login wall or nothing (``Content-Length: 0``), without validators.
        scripted: per-path steps consumed in order, e.g. ``{"/catalogue/x_1/index.html": [503, 503]}``:
            the first two requests for that path get 503, later ones are served normally (subject to the
            probabilities). Steps are status codes (404, 500, 503, 429, 304, 200) or names ("reset", "hang",
            "truncate", "bomb", "serve", "soft_block" or "challenge", "login", "empty", "error_page",
            "maintenance"); 304 answers Not Modified whatever the request's validators; "error_page" and
            "maintenance" are 200s in the site's template that are no page of the catalogue (scripted only).
            Resetting the stats restarts the scripts.
        max_connections: cap on simultaneously open client connections (``None``: no cap).
        over_capacity: what happens to a connection beyond the cap: ``"wait"`` (it is accepted by the
            kernel but not read until a slot frees up; idle keep-alive connections are closed after
            ``keepalive_timeout_s``, so waiting is bounded) or ``"refuse"`` (closed at once with a RST).
        robots_txt: body of ``/robots.txt``; ``None`` gives a 404, as on the live site.
    """

    latency_s: float = 0.0
    jitter_s: float = 0.0
    error_rate: float = 0.0
    rate_limit_rate: float = 0.0
    retry_after_s: int = 1
    reset_rate: float = 0.0
    hang_rate: float = 0.0
    hang_s: float = 30.0
    truncate_rate: float = 0.0
    truncate_fraction: float = 0.5
    bomb_rate: float = 0.0
    bomb_bytes: int = BOMB_BYTES
    soft_block_rate: float = 0.0
    scripted: Mapping[str, Sequence[int | str | Action]] = field(default_factory=dict)
    max_connections: int | None = None
    over_capacity: Literal["wait", "refuse"] = "wait"
    robots_txt: str | None = None

    def __post_init__(self) -> None:
        rates = (
            self.error_rate,
            self.rate_limit_rate,
            self.reset_rate,
            self.hang_rate,
            self.truncate_rate,
            self.bomb_rate,
            self.soft_block_rate,
        )
        if any(not 0.0 <= rate <= 1.0 for rate in rates):
            raise ValueError("fault probabilities must be between 0 and 1")
        if sum(rates) > 1.0 + 1e-9:
            raise ValueError("fault probabilities must not add up to more than 1")
        if self.latency_s < 0 or self.jitter_s < 0 or self.hang_s < 0 or self.retry_after_s < 0:
            raise ValueError("latency, jitter, hang and Retry-After must not be negative")
        if not 0.0 <= self.truncate_fraction < 1.0:
            raise ValueError("truncate_fraction must be in [0, 1)")
        if self.bomb_bytes < len(BOMB_PREFIX):
            raise ValueError(f"bomb_bytes must be at least {len(BOMB_PREFIX)}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        if self.over_capacity not in ("wait", "refuse"):
            raise ValueError("over_capacity must be 'wait' or 'refuse'")
        # Validate and normalise the scripts once, so a typo fails at start-up, not mid-crawl.
        normalised = {path: tuple(parse_action(step) for step in steps) for path, steps in self.scripted.items()}
        object.__setattr__(self, "scripted", normalised)

    @property
    def is_random(self) -> bool:
        """Whether any decision needs the RNG (lets the fault-free path skip it entirely)."""
        return bool(
            self.jitter_s
            or self.error_rate
            or self.rate_limit_rate
            or self.reset_rate
            or self.hang_rate
            or self.truncate_rate
            or self.bomb_rate
            or self.soft_block_rate
        )

    @property
    def bombs(self) -> bool:
        """Whether any request may be answered with a decompression bomb."""
        return self.bomb_rate > 0 or any(Action.BOMB in steps for steps in self.scripted.values())

    def decide(self, seed: int, path: str, n: int) -> Decision:
        """The fate of the ``n``-th (0-based) request for ``path``: deterministic in its arguments."""
        script = self.scripted.get(path)
        scripted = parse_action(script[n]) if script is not None and n < len(script) else None
        if not self.is_random:
            return Decision(scripted or Action.SERVE, self.latency_s)
        rng = random.Random(f"{seed}|{path}|{n}")
        delay = self.latency_s + (rng.random() * self.jitter_s if self.jitter_s else 0.0)
        if scripted is not None:
            return Decision(scripted, delay)
        draw = rng.random()
        for rate, action in (
            (self.reset_rate, Action.RESET),
            (self.hang_rate, Action.HANG),
            (self.truncate_rate, Action.TRUNCATE),
            (self.error_rate, Action.ERROR_500 if rng.random() < 0.5 else Action.ERROR_503),
            (self.rate_limit_rate, Action.RATE_LIMIT),
            (self.bomb_rate, Action.BOMB),
        ):
            if draw < rate:
                return Decision(action, delay)
            draw -= rate
        if draw < self.soft_block_rate:
            kind = min(len(SOFT_BLOCKS) - 1, int(draw / self.soft_block_rate * len(SOFT_BLOCKS)))
            return Decision(SOFT_BLOCKS[kind], delay)
        return Decision(Action.SERVE, delay)


NO_FAULTS = Faults()
